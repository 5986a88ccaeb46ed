"""Checkpoints mirrored during the run, and restored into a fresh attempt.

A thread of the attempt's wrapper looks at the run's ckpt/ every few seconds. Each checkpoint that
landed complete (checkpoints.incomplete) is copied, hashed as it is copied, to the run's directory on
the measured durable tier (`<durable>/remotegpu-ckpt/<project>/<run>/ckpt/`), staged and renamed, and
listed in its manifest; the newest K of each run plus the newest `best*` are kept. A copy that fails
(a full mirror disk) is said in the state file and never stops the run: the control side raises the
lag alert from it. Without a durable tier the thread still reads each checkpoint's step, which is
what a relaunch's resume is proved against, and holds the newest one for the control side to pull
(`<active>/ckpt-outbox/`, hashed here): the custody store is then the checkpoint's durable copy.

The state file (`<attempt>/ckpt-mirror.json`) is what `status` reports: the newest durable copy, the
newest local checkpoint, the step the attempt started from and the step of its first own checkpoint.
"""

import contextlib
import json
import os
import time

from .checkpoints import candidates, checkpoint_step, incomplete
from .declared_ckpt import bridge_declared
from .files import atomic_write, read
from .mirror import clone_hashing, copy_hashing, durable_problem

MANIFEST = "manifest.json"
STATE = "ckpt-mirror.json"
OUTBOX = "ckpt-outbox"
SETTLE_SECONDS = 0.2


def held_name(sha, name):
    """The outbox's file of one held checkpoint (the control side asks for it by the same name)."""
    return sha[:16] + "-" + name


def load_manifest(target):
    try:
        manifest = json.loads(read(os.path.join(target, MANIFEST)) or "null")
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("entries"), list):
        return {"seq": 0, "entries": []}
    return manifest


def kept(entries, keep):
    """The newest `keep` copies of the run's checkpoints, plus the newest copy of each best* file."""
    ordered = sorted(entries, key=lambda entry: entry["seq"], reverse=True)
    plain = [entry for entry in ordered if not entry["name"].startswith("best")][: max(1, keep)]
    best = {}
    for entry in ordered:
        if entry["name"].startswith("best"):
            best.setdefault(entry["name"], entry)
    return sorted(plain + list(best.values()), key=lambda entry: entry["seq"])


def newest_by_name(entries):
    """The copy a restore takes of each checkpoint name: its newest."""
    newest = {}
    for entry in sorted(entries, key=lambda entry: entry["seq"]):
        newest[entry["name"]] = entry
    return list(newest.values())


class CheckpointMirror:
    def __init__(self, spec, attempt_path):
        config = spec.ckpt_mirror
        self.spec, self.ckpt = spec, spec.ckpt
        self.state_path = os.path.join(attempt_path, STATE)
        self.root, self.target = config.root, config.target
        self.keep = int(config.keep or 2)
        self.step_key = config.step_key if isinstance(config.step_key, str) else None
        self.poll = float(config.poll_seconds or 5)
        # A checkpoint must hold still: unchanged since the previous look, or untouched for `settle`
        # seconds. The second is what lets a trainer that saves more often than the poll be mirrored
        # at all (unchanged between two looks it never is while it trains); a writer still at it holds
        # the file open (incomplete), and a copy the trainer replaced meanwhile is dropped (_copy).
        self.settle = min(SETTLE_SECONDS, self.poll / 2)
        # Without a durable tier a held copy stays at least this long before a newer one replaces it, so
        # the control side's pull of the copy it was told of finds it (a cat under way reads on anyway).
        self.hold_every = float(config.hold_seconds or 60)
        self.held_at = {}  # name -> time.monotonic() of its last hold
        self.final = False  # the command ended: its last checkpoint is held whatever the pace
        self.looked = {}  # name -> fingerprint at the previous look
        self.done = {}  # name -> fingerprint already handled (copied, or its step read)
        self.state = {"target": self.target, "mirrored": 0, "bytes": 0, "seconds": 0.0, "error": None}
        self.at_start = candidates(self.ckpt)
        self.bridged = {}  # the no-edit path: declared checkpoints already copied into ckpt/ (declared_ckpt)

    def begin(self):
        """Measure the durable tier (a missing or shared disk mirrors nothing, said why) and record
        the checkpoint the attempt starts from (the newest one present, restored or left here)."""
        start = self._newest_local(self.at_start)
        self.state["start"] = start
        if self.target:
            problem = durable_problem(self.spec.run_root, self.root, self.target)
            if problem:
                self.state["unusable"], self.target = problem, None
            else:
                try:
                    os.makedirs(self.target, exist_ok=True)
                    entries = load_manifest(self.target)["entries"]
                    self.state["newest"], self.state["files"] = (entries or [None])[-1], newest_by_name(entries)
                except OSError as exc:
                    self.state["unusable"], self.target = str(exc), None
        self.state["durable"] = bool(self.target)
        # What was there at the start was copied by the attempt that wrote it (or restored from a copy):
        # only checkpoints this attempt writes are copied, and the first of them proves its resume.
        self.looked.update(self.at_start)
        self.done.update(self.at_start)
        self._save()

    def _newest_local(self, found):
        plain = [name for name in found if not name.startswith("best")]
        if not plain:
            return None
        name = max(plain, key=lambda n: found[n][2])
        return self._described(name, found[name])

    def _described(self, name, fingerprint):
        """A checkpoint in ckpt/ as the state file tells of it: name, step (read from it), bytes, time."""
        step = checkpoint_step(os.path.join(self.ckpt, name), self.step_key)
        return {"name": name, "step": step, "bytes": fingerprint[1], "at": fingerprint[2] / 1e9}

    def loop(self, stop):
        self.begin()
        while not stop.wait(self.poll):
            self.look()
        self.final = True
        self.look()  # the last checkpoint before the command ended
        self.look()

    def look(self):
        refused = bridge_declared(self.spec, self.bridged)
        if refused:
            self.state["error"], self.state["error_at"] = refused, time.time()
        found, now_ns = candidates(self.ckpt), time.time_ns()
        for name, fingerprint in sorted(found.items(), key=lambda item: item[1][2]):
            steady = self.looked.get(name) == fingerprint or now_ns - fingerprint[2] >= self.settle * 1e9
            self.looked[name] = fingerprint
            if not steady or self.done.get(name) == fingerprint or self._hold_waits(name):
                continue
            path = os.path.join(self.ckpt, name)
            if incomplete(path):
                continue
            self.done[name] = fingerprint
            self._seen_new(name, path, fingerprint)
        self._save()

    def _hold_waits(self, name):
        """Whether a newer checkpoint of this name waits for its held copy's time (no durable tier only)."""
        at = self.held_at.get(name)
        return not self.target and not self.final and at is not None and time.monotonic() - at < self.hold_every

    def _seen_new(self, name, path, fingerprint):
        local = self._described(name, fingerprint)
        if not name.startswith("best"):
            self.state["local"] = local
            if self.state.get("first_written") is None:
                self.state["first_written"] = local
        if self.target:
            self._copy(name, path, fingerprint)
        else:
            self._hold(name, path, fingerprint, local)

    def _hold(self, name, path, fingerprint, local):
        """No durable tier: the newest copy of each checkpoint (latest and best alike: a continuation
        restores both) waits in the outbox for the control side's pull as a copy of its own (a reflink where
        the filesystem has them, else bytes; never a hard link, which a trainer saving in place rewrites),
        hashed as it is taken so the pull is checked against what the box wrote."""
        outbox = os.path.join(self.spec.active, OUTBOX)
        staging = os.path.join(outbox, ".hold-" + name)
        try:
            os.makedirs(outbox, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.remove(staging)
            sha = clone_hashing(path, staging)
            info = os.stat(path)
            if (info.st_ino, info.st_size, info.st_mtime_ns) != fingerprint:
                os.remove(staging)  # rewritten meanwhile: the next look holds the new one
                self.done.pop(name, None)
                return
            # Under its hash: a pull under way keeps reading the copy it asked for while a newer one is
            # held beside it; the copy before that goes.
            os.replace(staging, os.path.join(outbox, held_name(sha, name)))
            before = self.state.get("held", {}).get(name)
            older = self.state.get("held_before", {}).pop(name, None)
            if older and older["sha256"] != sha:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(outbox, held_name(older["sha256"], name)))
            if before and before["sha256"] != sha:
                self.state.setdefault("held_before", {})[name] = before
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(staging)
            self.state["error"], self.state["error_at"] = f"holding {name} for the control host: {exc}", time.time()
            return
        self.state.setdefault("held", {})[name] = {**local, "sha256": sha}
        self.state["error"] = None
        self.held_at[name] = time.monotonic()

    def _copy(self, name, path, fingerprint):
        manifest = load_manifest(self.target)
        seq = int(manifest.get("seq") or 0) + 1
        stored = f"{seq:06d}-{name}"
        staging = os.path.join(self.target, ".partial-" + stored)
        began = time.monotonic()
        try:
            sha = copy_hashing(path, staging)
            info = os.stat(path)
            if (info.st_ino, info.st_size, info.st_mtime_ns) != fingerprint:
                os.remove(staging)  # replaced while copied: the next look takes the new one
                self.done.pop(name, None)
                return
            os.rename(staging, os.path.join(self.target, stored))
            entry = {"file": stored, "name": name, "sha256": sha, "bytes": fingerprint[1], "seq": seq}
            entry.update(step=checkpoint_step(os.path.join(self.target, stored), self.step_key), at=time.time())
            entry["attempt"] = self.spec.attempt
            manifest["seq"], manifest["entries"] = seq, kept(manifest["entries"] + [entry], self.keep)
            atomic_write(os.path.join(self.target, MANIFEST), json.dumps(manifest))
            self._prune(manifest["entries"])
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(staging)
            self.state["error"], self.state["error_at"] = f"copy of {name}: {exc}", time.time()
            return
        self.state["newest"], self.state["error"] = entry, None
        # Every copy a restore may take (the newest of each name), not only this one: a probe that
        # missed a copy (two landed between looks) must not leave the control side naming a pruned file.
        self.state["files"] = newest_by_name(manifest["entries"])
        self.state["mirrored"] += 1
        self.state["bytes"] += fingerprint[1]
        self.state["seconds"] += time.monotonic() - began

    def _prune(self, entries):
        keep = {entry["file"] for entry in entries} | {MANIFEST}
        for name in os.listdir(self.target):
            if name not in keep and not name.startswith("."):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.target, name))

    def _save(self):
        with contextlib.suppress(OSError):  # a full data disk: the next look writes it again
            atomic_write(self.state_path, json.dumps(self.state))


def restore_checkpoints(spec):
    """The checkpoints a fresh attempt continues from, copied into ckpt/ from where the control side
    says (this box's durable tier, or a copy it uploaded), each hashed against the SHA-256 recorded
    when it was mirrored: (the problem or None, what was restored). Nothing mismatched is ever put in
    place. A durable copy the control side named but the mirror has since replaced by a newer one of the
    same name (its last look at the box came before the box was lost) is taken from the manifest."""
    wanted = spec.restore
    source = wanted.source if wanted else ""
    restored = []
    for item in wanted.files if wanted else []:
        name = os.path.basename(str(item.get("name", "")))
        if not name:
            return "a restore names no checkpoint", restored
        if not wanted.consume:
            item = newer_copy(source, item)
        stored = os.path.join(source, os.path.basename(str(item.get("file", ""))))
        if not os.path.isfile(stored):
            return "the durable checkpoint {} is not at {} on this box".format(item.get("file"), source), restored
        staging = os.path.join(spec.ckpt, ".restore-" + name)
        try:
            sha = copy_hashing(stored, staging)
        except OSError as exc:
            return f"restoring {name}: {exc}", restored
        if sha != item.get("sha256"):
            os.remove(staging)
            return "the durable checkpoint {} does not match its recorded SHA-256".format(item.get("file")), restored
        os.replace(staging, os.path.join(spec.ckpt, name))
        restored.append({key: item.get(key) for key in ("name", "file", "sha256", "step")})
        if wanted.consume:  # an upload from the control host: its copy here has served
            with contextlib.suppress(OSError):
                os.remove(stored)
    return None, restored


def newer_copy(source, item):
    """The manifest's newest copy of item's checkpoint name when it is newer than item (a later
    sequence number), else item."""
    if not source:
        return item
    seq = item.get("seq") if isinstance(item.get("seq"), int) else 0
    for entry in reversed(load_manifest(source)["entries"]):
        if isinstance(entry, dict) and entry.get("name") == item.get("name"):
            return entry if isinstance(entry.get("seq"), int) and entry["seq"] > seq else item
    return item
