"""The environment audit: one shell script (one round-trip) and a parser for what it prints.

Pure: knows nothing of Django, Celery or SSH. The probe module runs the script on a node.
"""

import re

from node.transport import shell_path
from wrapper.digits import ascii_int

GIB = 1024**3
SECTION = re.compile(r"^@@([a-z_]+)$", re.MULTILINE)

LIGHT_SCRIPT = "printf '@@reach\\nok\\n@@uptime\\n'; cat /proc/uptime 2>/dev/null || uptime"


def audit_script(data_root: str) -> str:
    """Bash that prints @@section blocks; every probe is allowed to fail without stopping the rest."""
    return f"""
set +e
section() {{ printf '\\n@@%s\\n' "$1"; }}
root={shell_path(data_root)}
section reach; echo ok
section root; p="$root"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; echo "$root"; echo "$p"
section df_bytes; df -P -B1 "$p" 2>&1
section df_h; df -h "$p" 2>&1
section df_i; df -P -i "$p" 2>&1
section gpu
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,memory.total,memory.used,utilization.gpu,driver_version \\
    --format=csv,noheader,nounits 2>&1
  echo "cuda: $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1 | cut -d' ' -f3)"
else
  echo none
fi
section cgroup
v1=/sys/fs/cgroup/memory/memory.limit_in_bytes
if [ -r /sys/fs/cgroup/memory.max ]; then echo "v2 $(cat /sys/fs/cgroup/memory.max)";
elif [ -r "$v1" ]; then echo "v1 $(cat "$v1")";
else echo none; fi
section mem; awk '/^MemTotal:/ {{print $2}}' /proc/meminfo
section cpu; nproc
section python
py=$(command -v python3 || command -v python)
if [ -n "$py" ]; then
  "$py" -c 'import sys, platform; print(sys.executable); print(platform.python_version())'
  "$py" -c 'import torch; print(torch.__version__); print(torch.version.cuda); print(torch.cuda.is_available())' \\
    2>/dev/null || echo "torch-missing"
else
  echo none
fi
section tmux; command -v tmux || echo missing
"""


def split_sections(output: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        match = SECTION.match(line)
        if match:
            current = match.group(1)
            sections[current] = []
        elif current is not None and line.strip():
            sections[current].append(line.rstrip())
    return sections


def _df_row(lines: list[str]) -> list[str] | None:
    # df -P: a header, then one row; the mount point is last and may not contain spaces here.
    rows = [line.split() for line in lines[1:] if line.split()]
    return rows[-1] if rows and len(rows[-1]) >= 6 else None


def parse_df_bytes(lines: list[str]) -> dict | None:
    row = _df_row(lines)
    counts = [ascii_int(cell) for cell in row[1:4]] if row else [None]
    if None in counts:
        return None  # not df's answer: measured as nothing, never as a number it did not say
    return {"device": row[0], "mount": row[-1], "total": counts[0], "used": counts[1], "free": counts[2]}


def parse_df_inodes(lines: list[str]) -> dict | None:
    row = _df_row(lines)
    counts = [ascii_int(cell) for cell in row[1:4]] if row else [None]
    if None in counts:
        return None  # some filesystems report "-" for inodes
    return {"total": counts[0], "used": counts[1], "free": counts[2]}


def parse_gpus(lines: list[str]) -> tuple[list[dict], str | None]:
    if not lines or lines[0] == "none":
        return [], None
    gpus, cuda = [], None
    for line in lines:
        if line.startswith("cuda:"):
            cuda = line.split(":", 1)[1].strip() or None
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6 or ascii_int(parts[0]) is None:
            continue
        index, name, total, used, util, driver = parts
        gpus.append(
            {
                "index": ascii_int(index),
                "name": name,
                "memory_total_mib": _int_or_none(total),
                "memory_used_mib": _int_or_none(used),
                "utilization_pct": _int_or_none(util),
                "driver": driver,
            }
        )
    return gpus, cuda


def _int_or_none(text: str) -> int | None:
    return ascii_int(text.strip())


def parse_cgroup(lines: list[str]) -> dict:
    if not lines or lines[0] == "none":
        return {"version": None, "memory_max": None}
    version, _, value = lines[0].partition(" ")
    limit = ascii_int(value.strip(), most=2**63)
    # cgroup v1 reports "no limit" as a huge number near 2**63.
    if limit is not None and limit >= 2**60:
        limit = None
    return {"version": version, "memory_max": limit}


def parse_python(lines: list[str]) -> dict:
    if not lines or lines[0] == "none":
        return {"executable": None, "version": None, "torch": None, "torch_cuda": None, "cuda_available": None}
    info = {"executable": lines[0], "version": lines[1] if len(lines) > 1 else None}
    if len(lines) >= 5:
        info.update(
            torch=lines[2], torch_cuda=None if lines[3] == "None" else lines[3], cuda_available=lines[4] == "True"
        )
    else:
        info.update(torch=None, torch_cuda=None, cuda_available=None)
    return info


def parse_audit(output: str) -> dict:
    sections = split_sections(output)
    gpus, cuda = parse_gpus(sections.get("gpu", []))
    root_lines = sections.get("root", [])
    return {
        "reachable": sections.get("reach") == ["ok"],
        "data_root": root_lines[0] if root_lines else None,
        "resolved_path": root_lines[1] if len(root_lines) > 1 else None,
        "disk": parse_df_bytes(sections.get("df_bytes", [])),
        "disk_human": sections.get("df_h", []),
        "inodes": parse_df_inodes(sections.get("df_i", [])),
        "gpus": gpus,
        "cuda_driver_version": cuda,
        "cgroup": parse_cgroup(sections.get("cgroup", [])),
        "memory_total": int(sections["mem"][0]) * 1024 if sections.get("mem") else None,  # kB
        "cpu_count": int(sections["cpu"][0]) if sections.get("cpu") else None,
        "python": parse_python(sections.get("python", [])),
        "tmux": (sections.get("tmux") or ["missing"])[0] != "missing",
    }


def audit_warnings(parsed: dict, low_free_bytes: int, inode_warn_pct: int = 80, inode_cap: int | None = None) -> list:
    """What a person should know before paying for compute on this box (level, message)."""
    warnings = []
    disk, inodes = parsed.get("disk"), parsed.get("inodes")
    if disk is None:
        warnings.append(("error", "Could not measure free bytes on the data root's device."))
    elif disk["free"] < low_free_bytes:
        warnings.append(("warn", f"Only {disk['free'] / GIB:.1f} GiB free on {disk['device']} ({disk['mount']})."))
    if inodes and inodes["total"]:
        used_pct = 100 * inodes["used"] / inodes["total"]
        if used_pct >= inode_warn_pct:
            warnings.append(("warn", f"Inodes {used_pct:.0f}% used on {disk['device'] if disk else 'the device'}."))
    if inode_cap:
        warnings.append(("info", f"The platform caps the shared filesystem at {inode_cap:,} inodes."))
    if not parsed.get("gpus"):
        warnings.append(("info", "No GPU seen (nvidia-smi absent or reports none)."))
    if not parsed.get("tmux"):
        warnings.append(("warn", "tmux is missing: runs will detach with setsid nohup (fallback)."))
    memory_max = (parsed.get("cgroup") or {}).get("memory_max")
    if memory_max is not None and memory_max < 16 * GIB:
        warnings.append(("warn", f"cgroup memory limit is {memory_max / GIB:.1f} GiB: data loaders may be OOM-killed."))
    python = parsed.get("python") or {}
    if python.get("executable") and not python.get("torch"):
        warnings.append(("info", "torch is not importable by the default python3."))
    return [{"level": level, "message": message} for level, message in warnings]
