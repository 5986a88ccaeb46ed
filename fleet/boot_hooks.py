"""The start hooks a run leaves on its box: the boot marker a container restart rewrites (vast.ai's on-start
script), and the hook that relaunches cut-off attempts after a restart with no control plane (the wrapper's
boot-resume), hooked into the platform's on-start file or the user's crontab. Each over the run's node
client's transport, each idempotent."""

import shlex
import uuid

from django.conf import settings


def appended_once(script: str, line: str) -> str:
    """A shell command that makes script executable and appends line to it unless it is there."""
    quoted_script, quoted_line = shlex.quote(script), shlex.quote(line)
    return (
        f"touch {quoted_script} && chmod +x {quoted_script} && "
        f"(grep -qxF {quoted_line} {quoted_script} || printf '%s\\n' {quoted_line} >> {quoted_script})"
    )


def install_start_hook(node, hook: str) -> None:
    """vast.ai runs its on-start script at every container start: make it rewrite our boot
    marker, so the watcher can tell a restarted container from a crashed run (idempotent)."""
    line = f'echo "$(date +%s%N)" > {shlex.quote(node.boot_marker())}  # remotegpu: container started'
    script = appended_once(hook, line)
    node.check(node.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT), "install start hook")


def install_boot_hook(node, onstart: str | None) -> str:
    """The start hook that relaunches cut-off attempts after a reboot or container restart with no
    control plane (the wrapper's boot-resume): a script in tools/, run from the platform's on-start
    file where it has one (vast.ai), else from the user's crontab (@reboot). Where it is hooked in."""
    layout = node.layout
    script = f"{layout.tools}/start-hook.sh"
    python = node.python or settings.NODE_PYTHON
    body = (
        "#!/bin/sh\n# remotegpu: after a restart, relaunch this project's cut-off attempts (boot-resume)\n"
        f'echo "$(date +%s%N)" > {shlex.quote(node.boot_marker())}\n'
        f"exec {shlex.quote(python)} -I -S {shlex.quote(node.wrapper_path)} boot-resume "
        f"{shlex.quote(layout.run_root)} >> {shlex.quote(layout.tools + '/boot-resume.log')} 2>&1\n"
    )
    staging = f"{script}.upload-{uuid.uuid4().hex}"
    node.upload_bytes(body.encode(), staging)
    line = f"sh {shlex.quote(script)}  # remotegpu start hook"
    if onstart:
        hooked = appended_once(onstart, line)
        where = f"the platform's on-start script {onstart}"
    else:
        cron = shlex.quote(f"@reboot {line}")
        hooked = (
            "command -v crontab >/dev/null && "
            f"( crontab -l 2>/dev/null | grep -vF {shlex.quote(script)}; echo {cron} ) | crontab -"
        )
        where = "the user's crontab (@reboot)"
    result = node.transport.run_script(
        f"chmod +x {shlex.quote(staging)} && mv -f {shlex.quote(staging)} {shlex.quote(script)} && {hooked}",
        timeout=settings.SSH_COMMAND_TIMEOUT,
    )
    if result.exit_code != 0:
        return f"{script}, not hooked in (no crontab on the box): run it at boot"
    return f"{script}, run from {where}"
