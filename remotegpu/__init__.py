"""The RemoteGPU command-line client (stdlib only): `python -m remotegpu --help`."""
