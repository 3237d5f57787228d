"""scripts/preflight/trl_facts.py: the installed TRL's vLLM range, read from its metadata."""

from __future__ import annotations

from preflight import trl_facts as vfacts


def test_installed_trl_range_is_read_from_its_metadata(tmp_path, monkeypatch):
    dist = tmp_path / "trl-9.9.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: trl\nVersion: 9.9.0\nProvides-Extra: vllm\n"
        'Requires-Dist: accelerate>=1.10.1\nRequires-Dist: vllm<=0.27.1,>=0.22.0; extra == "vllm"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = vfacts.trl_vllm_range()
    assert found["trl_installed"] and found["trl_version"] == "9.9.0"
    assert sorted(found["vllm_spec"].split(",")) == ["<=0.27.1", ">=0.22.0"]
