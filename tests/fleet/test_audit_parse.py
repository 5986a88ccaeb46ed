"""The audit parser on the formats real tools print (nvidia-smi CSV, cgroup v1/v2, df -P)."""

from fleet.audit import GIB, audit_warnings, parse_audit

GPU_BOX = """
@@reach
ok
@@root
/root/autodl-tmp
/root/autodl-tmp
@@df_bytes
Filesystem            1-blocks        Used   Available Capacity Mounted on
/dev/nvme1n1      53687091200 50465865728  3221225472      95% /root/autodl-tmp
@@df_h
Filesystem      Size  Used Avail Use% Mounted on
/dev/nvme1n1     50G   47G  3.0G  95% /root/autodl-tmp
@@df_i
Filesystem        Inodes   IUsed  IFree IUse% Mounted on
/dev/nvme1n1     3276800 3112960 163840   95% /root/autodl-tmp
@@gpu
0, NVIDIA A100-SXM4-80GB, 81920, 4, 0, 550.54.15
1, NVIDIA A100-SXM4-80GB, 81920, 40960, 97, 550.54.15
cuda: 12.4
@@cgroup
v2 68719476736
@@mem
1056000000
@@cpu
32
@@python
/root/miniconda3/bin/python3
3.10.8
2.1.2+cu121
12.1
True
@@tmux
missing
"""


def test_gpu_box_is_parsed():
    parsed = parse_audit(GPU_BOX)
    assert parsed["disk"] == {
        "device": "/dev/nvme1n1",
        "mount": "/root/autodl-tmp",
        "total": 53687091200,
        "used": 50465865728,
        "free": 3221225472,
    }
    assert parsed["inodes"] == {"total": 3276800, "used": 3112960, "free": 163840}
    assert [gpu["name"] for gpu in parsed["gpus"]] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert parsed["gpus"][1]["utilization_pct"] == 97
    assert parsed["cuda_driver_version"] == "12.4"
    assert parsed["cgroup"] == {"version": "v2", "memory_max": 64 * GIB}
    assert parsed["python"]["torch"] == "2.1.2+cu121" and parsed["python"]["cuda_available"] is True
    assert parsed["tmux"] is False


def test_gpu_box_warnings_name_the_pressure():
    messages = [w["message"] for w in audit_warnings(parse_audit(GPU_BOX), 20 * GIB, inode_cap=200000)]
    assert "Only 3.0 GiB free on /dev/nvme1n1 (/root/autodl-tmp)." in messages
    assert "Inodes 95% used on /dev/nvme1n1." in messages
    assert any("tmux is missing" in message for message in messages)
    assert any("200,000 inodes" in message for message in messages)


def test_unlimited_cgroups_mean_no_limit():
    assert parse_audit("@@cgroup\nv2 max\n")["cgroup"]["memory_max"] is None
    assert parse_audit("@@cgroup\nv1 9223372036854771712\n")["cgroup"]["memory_max"] is None


def test_missing_sections_are_none_not_errors():
    parsed = parse_audit("@@reach\nok\n")
    assert parsed["disk"] is None and parsed["gpus"] == [] and parsed["python"]["executable"] is None
    assert audit_warnings(parsed, GIB)[0]["level"] == "error"
