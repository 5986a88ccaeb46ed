"""Platform hooks: the profiles checked against the seed's reference, an instance's overrides, and the
wrapper's parts that apply them (a real shell sourcing a real file; the log masker on split reads)."""

import re
from pathlib import Path

import pytest

from platforms import catalog
from platforms.hooks import HookError, effective, identity, parse_overrides
from platforms.layout import NodeLayout
from tests.box_specs import spec_data
from tests.runs.conftest import load_wrapper

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "profiles"
# The facts the hooks rest on, as the seed's reference profiles write them (file: lines quoted from it).
# The profiles are checked against these here; where the reference itself is at hand (a checkout beside
# ../shared), test_the_quoted_facts_are_the_references checks that each quote is still in it.
FACTS = {
    "autodl.md": [
        "china_mirror_needed: true",
        "PROXY_HOOK='source /etc/network_turbo 2>/dev/null || true'",
        "HF_ENDPOINT=https://hf-mirror.com",
        "HF_HUB_DISABLE_XET=1",
        "HF_HOME=$CACHE_ROOT/huggingface",
    ],
    "china.md": [
        "china_mirror_needed: true",
        "HF_ENDPOINT=https://hf-mirror.com",
        "export https_proxy=http://turbo.gpushare.com:<PORT> http_proxy=http://turbo.gpushare.com:<PORT>",
        "`unset http_proxy https_proxy`",
        "(interpreter at\n  `/root/miniconda3/envs/myconda/bin/python`)",
    ],
    "runpod.md": ["china_mirror_needed: false", "`PROXY_HOOK=` none.", "PIP_CACHE_DIR=/workspace/.cache/pip"],
    "vastai.md": ["china_mirror_needed: false", "PROXY_HOOK=''", "HF_HOME=/workspace/.cache/huggingface"],
    "lambda.md": ["china_mirror_needed: false", "PROXY_HOOK=     (none — direct egress; no network_turbo)"],
    "paperspace.md": ["china_mirror_needed: false", "PROXY_HOOK=                      # none"],
    "generic-ssh.md": ["china_mirror_needed: host-dependent", "PROXY_HOOK=        (none by default"],
    "local.md": ["china_mirror_needed: host-dependent", "PROXY_HOOK=                 (none;"],
}
# Each profile's reference file (the China rentals share one).
REFERENCE_OF = {
    "autodl": "autodl.md",
    "matpool": "china.md",
    "gpushare": "china.md",
    "featurize": "china.md",
    "lanrui": "china.md",
    "runpod": "runpod.md",
    "vastai": "vastai.md",
    "lambda": "lambda.md",
    "paperspace": "paperspace.md",
    "generic-ssh": "generic-ssh.md",
    "local": "local.md",
}


def facts(key: str) -> list[str]:
    return FACTS[REFERENCE_OF[key]]


@pytest.mark.parametrize("key", sorted(REFERENCE_OF))
def test_each_profiles_hooks_follow_its_reference(key):
    hooks = catalog.get_profile(key).hooks
    behind_the_wall = "china_mirror_needed: true" in facts(key)
    # Behind the GFW: the mirror and the LFS path it serves (AD2, shared by the China family);
    # elsewhere no mirror is forced on a box.
    assert (hooks["env"].get("HF_ENDPOINT") == "https://hf-mirror.com") == behind_the_wall
    assert (hooks["env"].get("HF_HUB_DISABLE_XET") == "1") == behind_the_wall
    # Every cache the reference redirects off the small disk lands in the project's cache/ on the node.
    assert hooks["env"]["HF_HOME"] == "$CACHE/huggingface"
    assert hooks["env"]["PIP_CACHE_DIR"] == "$CACHE/pip"
    has_proxy_hook = any(fact.startswith("PROXY_HOOK='source") or "turbo.gpushare.com" in fact for fact in facts(key))
    assert (hooks["proxy"] is not None) == (has_proxy_hook and key in ("autodl", "gpushare")), key


def test_the_proxy_hooks_are_the_references():
    autodl = catalog.get_profile("autodl").hooks["proxy"]
    assert autodl["source"] == "/etc/network_turbo" and {"http_proxy", "https_proxy"} <= set(autodl["unset"])
    gpushare = catalog.get_profile("gpushare").hooks["proxy"]
    assert "turbo.gpushare.com" in gpushare["note"] and gpushare["unset"] == ["http_proxy", "https_proxy"]


def test_the_interpreters_are_the_references():
    assert catalog.get_profile("autodl").hooks["interpreter"] == "/root/miniconda3/bin/python"
    matpool = catalog.get_profile("matpool").hooks["interpreter"]
    assert matpool == "/root/miniconda3/envs/myconda/bin/python" and any(matpool in fact for fact in FACTS["china.md"])
    assert catalog.get_profile("runpod").hooks["interpreter"] is None  # the image is the environment


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the seed's reference is not beside this checkout")
@pytest.mark.parametrize("name", sorted(FACTS))
def test_the_quoted_facts_are_the_references(name):
    text = (REFERENCE / name).read_text()
    for fact in FACTS[name]:
        assert fact in text, f"{name} no longer says {fact!r}"


def test_an_instance_overrides_any_hook():
    platform = catalog.get_profile("autodl").hooks
    overrides = parse_overrides("interpreter: /opt/venv/bin/python\nenv: {HF_ENDPOINT: null, WANDB_MODE: offline}\n")
    hooks = effective(platform, overrides)
    assert hooks["interpreter"] == "/opt/venv/bin/python"
    assert "HF_ENDPOINT" not in hooks["env"] and hooks["env"]["WANDB_MODE"] == "offline"
    assert hooks["proxy"] == platform["proxy"]
    assert effective(platform, {"proxy": None})["proxy"] is None
    assert identity(hooks) != identity(platform) and len(identity(hooks)) == 64


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[1, 2]", "a mapping"),
        ("mirror: x", "mirror: not a hook"),
        ("env: {'BAD NAME': x}", "env.BAD NAME"),
        ("env: {REMOTEGPU_RUN_ID: x}", "not REMOTEGPU_"),
        ("interpreter: python3", "interpreter: an absolute path"),
        ("interpreter: /opt/../bin/python", "without '..'"),
        ("proxy: {source: /etc/x}", "proxy.exports: is missing"),
        ("env: [", "Not YAML"),
        ("x" * 5000, "at most"),
    ],
)
def test_bad_overrides_name_their_field(text, words):
    with pytest.raises(HookError, match=re.escape(words)):
        parse_overrides(text)


@pytest.fixture(scope="module")
def wrapper():
    return load_wrapper()


def test_sourcing_a_hook_gives_what_it_exported_and_nothing_the_shell_sets(wrapper, tmp_path):
    hook = tmp_path / "turbo"
    hook.write_text('export http_proxy=http://10.0.0.1:8080\nexport PATH="/opt/turbo/bin:$PATH"\ncd /\necho noisy\n')
    layout = NodeLayout(str(tmp_path), "p", "r1", "")
    hooks = {"proxy": {"source": str(hook), "exports": {}, "unset": []}}
    spec = wrapper.spec_of(spec_data(layout, cache=str(tmp_path / "cache"), hooks=hooks))
    added, report = wrapper.hook_env(spec, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert added == {"http_proxy": "http://10.0.0.1:8080", "PATH": "/opt/turbo/bin:/usr/bin:/bin"}
    assert report["proxy"] == {"source": str(hook), "found": True, "exported": ["PATH", "http_proxy"]}
    spec = spec.but(hooks={"proxy": {"source": str(tmp_path / "missing"), "exports": {}, "unset": []}})
    added, report = wrapper.hook_env(spec, {"PATH": "/usr/bin"})
    assert added == {} and report["proxy"]["found"] is False


def test_cache_names_expand_under_the_project_cache(wrapper, tmp_path):
    hooks = {"env": {"HF_HOME": "$CACHE/huggingface", "X": "$CACHEX"}}
    spec = wrapper.spec_of(spec_data(NodeLayout(str(tmp_path), "p", "r1", ""), cache="/data/p/cache", hooks=hooks))
    added, _ = wrapper.hook_env(spec, {})
    assert added == {"HF_HOME": "/data/p/cache/huggingface", "X": "$CACHEX"}


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_the_masker_catches_a_value_split_across_reads(wrapper, size):
    secret = "tok-0123456789abcdef"
    stream = f"start {secret} middle\nline two {secret}{secret}\nend {secret[:5]}".encode()
    masker = wrapper.Masker([secret])
    out = b"".join(masker.feed(stream[i : i + size]) for i in range(0, len(stream), size)) + masker.close()
    assert out.decode() == ("start [secret masked] middle\nline two [secret masked][secret masked]\nend tok-0")


def test_the_masker_writes_a_finished_line_at_once(wrapper):
    masker = wrapper.Masker(["a-long-secret-value"])
    assert masker.feed(b"epoch 1 loss=0.3\n") == b"epoch 1 loss=0.3\n"
    assert masker.feed(b"partial") == b""  # could still become a value
    assert masker.close() == b"partial"
