"""RemoteGPU node wrapper: runs on the GPU box, stdlib only, Python 3.8+.

Written as this package, one module per subcommand; shipped as the one file `node/build.py`
makes of it, whose hash names its version.

Uploaded under a versioned name (wrapper-<sha>.py) and never overwritten, so a live run never
has the file it is executing changed under it. Subcommands (main.COMMANDS), most reading a JSON spec file:

  preflight  prove inputs exist, hash identities, measure bytes and inodes   -> JSON on stdout
  smoke      run the command once with REMOTEGPU_SMOKE=1 on CPU              -> JSON on stdout
  run        the detached attempt: pid, heartbeat, command, exit marker, closeout
  status     what is true on the node right now                              -> JSON on stdout
  probe      status of many runs (request JSON on stdin): the watcher's tick -> JSON on stdout
  follow     push what the runs write as they write it, and answer probes asked on stdin (JSON lines)
  stop       a person's stop (request on stdin): SIGTERM, SIGKILL after the grace
  put-secrets  the attempt's secrets (values on stdin) into a 0600 file the attempt reads once and deletes
  gpus       what nvidia-smi reports, and the GPU processes that are not ours
  abandon    quarantine an attempt that has no process and no exit marker
  roster     relative path, bytes and SHA-256 of every file of the sealed export -> JSON
  extract    unpack a shipped source tarball safely into the run's src/
  mirror     copy the sealed export to a durable tier, hashed against the sealed roster
  rehash     re-hash copies against a roster the control side sends (stdin)
  close-active  move a failed run's active/ into quarantine/ with a reason (stdin)
  idle ROOT  processes that work in or write under ROOT (the shutdown check)
  boot-resume ROOT  the start hook's: relaunch in place each opted-in attempt under ROOT a restart cut off
  clean-caches  measure and remove the cache paths the control side names (stdin)
  remove-copy   delete one copy of a sealed export, strictly inside the root named (stdin)
  dataset-roster  path, bytes, SHA-256 of every file under a dataset root (stdin)
  stage-check   what of a dataset is already staged in its cache/data/<roster-sha>/ (stdin)
  stage-receive a dataset's frames on stdin, each file hashed as it lands (control-host source)
  stage-send ROOT  the frames a receiver asks for, strictly inside ROOT (a source box's forced command)
  stage-pull    stage from this box's own directory or another box over one ssh stream (stdin)
  stage-grant   add or remove the temporary key that may run stage-send only (stdin)

Every subcommand prints one JSON object as its last line; node/protocol.py says what each holds.
"""
