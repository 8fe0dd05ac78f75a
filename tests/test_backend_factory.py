"""make_service_client picks the backend from TINKER_API_KEY."""

from __future__ import annotations

import pytest

from backend import LocalServiceClient, make_service_client, resolve_backend


def test_auto_is_local_without_key(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    assert resolve_backend("auto") == "local"
    client = make_service_client(root=tmp_path)
    assert isinstance(client, LocalServiceClient)
    assert client.root == tmp_path


def test_auto_is_tinker_with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test-key")
    assert resolve_backend("auto") == "tinker"
    assert resolve_backend("local") == "local"
    monkeypatch.setenv("TINKER_API_KEY", "")
    assert resolve_backend("auto") == "local"


def test_unknown_backend_name() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend("gpu-cluster")  # type: ignore[arg-type]
