"""scripts/common/versions.py: the packaging-free fallback must agree with packaging on real-world metadata."""

from __future__ import annotations

import itertools

import pytest
from common import versions

VERSIONS = [
    "0.22.0",
    "0.22.1",
    "0.25.0",
    "0.31.0",
    "0.31.0+cu129",
    "0.31.1",
    "0.32.0",
    "0.33.0",
    "0.31.0rc1",
    "0.31.0.dev3",
    "0.31.0.post1",
    "1.16.0",
    "1.16",
    "1.16.0.dev0",
    "2.13.0+cpu",
    "2.13.0",
    "2.14.0",
    "0.8.2",
    "0.8.1",
    "0.45.1",
    "0.50.2",
    "5.1.0",
    "5.24.0",
    "1!0.1",
    "2026.10.9",
    "0.19.8",
    "0.0.0",
]
SPECIFIERS = [
    ">=0.22.0,<=0.31.0",
    "<=0.31.0,>=0.22.0",
    "==2.13.0",
    "!=5.1.0",
    ">=0.8.2",
    "~=0.31.0",
    "~=1.16",
    "==0.31.*",
    "!=5.0.*,!=5.1.*,>=4.56.0",
    "<0.31.0",
    ">0.31.0",
    "===1.16.0",
    "",
    ">=1.0,<2",
    "<5.18.0,>=5.10.4",
]


@pytest.fixture
def fallback(monkeypatch):
    monkeypatch.setattr(versions, "HAVE_PACKAGING", False)
    return versions


@pytest.mark.parametrize(("spec", "version"), list(itertools.product(SPECIFIERS, VERSIONS)))
def test_fallback_specifier_matches_packaging(fallback, spec, version):
    from packaging.specifiers import SpecifierSet

    expected = SpecifierSet(spec).contains(version, prereleases=True)
    assert fallback.specifier_contains(spec, version) is expected


@pytest.mark.parametrize(("left", "right"), list(itertools.combinations(VERSIONS, 2)))
def test_fallback_ordering_matches_packaging(fallback, left, right):
    from packaging.version import Version

    expected = (Version(left) > Version(right)) - (Version(left) < Version(right))
    assert fallback.compare_versions(left, right) == expected


@pytest.mark.parametrize("use_packaging", [True, False])
def test_requirement_parsing_from_trl_metadata(monkeypatch, use_packaging):
    monkeypatch.setattr(versions, "HAVE_PACKAGING", use_packaging)
    req = versions.parse_requirement('vllm<=0.31.0,>=0.22.0; extra == "vllm"')
    assert (req.key, req.specifier, req.extras) == ("vllm", "<=0.31.0,>=0.22.0", ())
    assert req.applies(extra="vllm") is True
    assert req.applies(extra="peft") is False
    assert req.applies(extra=None) is False
    nested = versions.parse_requirement('transformers[hub-kernels]; extra == "kernels"')
    assert nested.extras == ("hub-kernels",) and nested.specifier == ""
    gated = versions.parse_requirement('harbor>=0.13.0; python_version >= "3.12" and extra == "harbor"')
    assert gated.applies(extra="harbor", python_version="3.11") is False
    assert gated.applies(extra="harbor", python_version="3.12") is True
    assert versions.marker_extras(gated.marker) == ("harbor",)
    old_style = versions.parse_requirement("torch (==2.13.0)")
    assert old_style.specifier == "==2.13.0"


@pytest.mark.parametrize("use_packaging", [True, False])
@pytest.mark.parametrize("garbage", ["", "!!!", "vllm>=>1", "torch==", "name; extra ==="])
def test_garbage_never_raises(monkeypatch, use_packaging, garbage):
    monkeypatch.setattr(versions, "HAVE_PACKAGING", use_packaging)
    req = versions.parse_requirement(garbage)
    if req is not None:  # a bare name is a valid requirement; the marker may still be undecidable
        assert req.applies(extra="x") in (True, False, None)
    assert versions.specifier_contains(">=1.0", garbage) in (None, False)
    assert versions.compare_versions(garbage, "1.0") is None or garbage == ""


@pytest.mark.parametrize("use_packaging", [True, False])
def test_absurdly_long_versions_are_unparsable_never_an_error(monkeypatch, use_packaging):
    """Issue 27: packaging and int() raise ValueError on a 5,000-digit number; every entry point says None instead."""
    monkeypatch.setattr(versions, "HAVE_PACKAGING", use_packaging)
    for digits in ("9" * 41, "9" * 5000):
        for text in (digits, f"1.{digits}", f"1.0rc{digits}", f"1.0.post{digits}", f"{digits}!1.0", f"1.0+{digits}"):
            assert versions.version_key(text) is None and not versions.is_valid_version(text)
            assert versions.compare_versions(text, "1.0") is None
            assert versions.specifier_contains(">=1.0", text) is None
            assert versions.specifier_contains(f"=={text}", "1.0") is None
            assert versions.specifier_contains(f"~={text}", "1.0") is None
        assert versions.parse_requirement(f"trl=={digits}") is None
        assert versions.evaluate_marker(f'python_version >= "{digits}"') is None
    assert versions.version_key("1." + "0" * 300) is None  # over 256 characters
    huge = "99999999999999999999.0.0"  # 20 digits: a version, and newer than any release
    assert versions.compare_versions(huge, "1.16.0") == 1
    assert versions.specifier_contains(f">{'9' * 19}", huge) is True


def test_base_version_drops_local_label():
    assert versions.base_version("0.31.0+cu129") == "0.31.0"
    assert versions.base_version("not a version") is None
    assert versions.normalize_name("Liger_Kernel") == "liger-kernel"


def test_broken_packaging_install_falls_back(tmp_path):
    """A `packaging` that is found but fails to import must not break the scripts: the fallback takes over."""
    import subprocess
    import sys

    from conftest import SCRIPTS_DIR

    broken = tmp_path / "packaging"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('half-installed packaging')\n")
    code = (
        "from common import versions; "
        "print(versions.HAVE_PACKAGING, versions.specifier_contains('>=0.22.0,<=0.31.0', '0.33.0'), "
        "versions.HAVE_PACKAGING)"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-B",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(SCRIPTS_DIR)!r}]; {code}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "False"]


def test_packaging_is_imported_lazily():
    """Importing versions must not import packaging (the diagnostic's speed budget depends on it)."""
    import subprocess
    import sys

    from conftest import SCRIPTS_DIR

    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r}); from common import versions; "
        "print('packaging' in sys.modules); versions.compare_versions('1.0', '2.0'); "
        "print(versions.HAVE_PACKAGING == ('packaging' in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
