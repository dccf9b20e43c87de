"""``bench image bump``: the new-framework-version workflow.

Point an engine at a new base (pinning it by the digest the local image reports when the
reference has none), rebuild, read the versions from inside, record the lock entry, and only
then rewrite image.yaml (base, base_note, provides) and the Dockerfile's ARG defaults.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.clock import utc_now
from orchestrator.docker_client import connect, find_image
from orchestrator.errors import BadInput
from orchestrator.imagebuild.build import BuildReporter, Built, QuietReporter, build_engine_image
from orchestrator.imagebuild.facts import repo_digest
from orchestrator.imagebuild.metadata import get_image_meta, set_default_base
from orchestrator.imagebuild.refs import parse_ref


def bump_engine_image(engine: str, base: str, *, pinned_only: bool = False, nocache: bool = False,
                      reporter: BuildReporter | None = None, lock: Path | None = None) -> Built:
    reporter = reporter or QuietReporter()
    meta = get_image_meta(engine)
    ref = parse_ref(base, "--base")
    how = "digest given on the command line"
    if not ref.pinned:
        client = connect()
        try:
            image = find_image(client, str(ref))
            digest = repo_digest(image, str(ref)) if image is not None else None
        finally:
            client.close()
        if digest:
            ref = ref.with_digest(digest)
            how = "digest read from the local image's RepoDigests (what `docker pull` fetched)"
            reporter.note(f"pinned {base} to {ref.digest} (the local image's registry digest)")
        else:
            how = "NOT pinned by digest: the reference has none and the local image reports no registry digest"
    if pinned_only and not ref.pinned:
        raise BadInput(f"--base: '{base}' is not pinned by digest and no registry digest is known locally (--require-pinned)")
    built = build_engine_image(engine, str(ref), pinned_only=pinned_only, nocache=nocache, reporter=reporter, lock=lock)
    entry = built.entry
    provides: dict[str, str | bool | None] = {
        "framework": " ".join(str(x) for x in (entry.framework, entry.framework_version) if x),
        "cuda": entry.cuda, "cudnn": entry.cudnn, "python": entry.python, "os": entry.os,
        "measured": True,
    }
    note = f"Set by `bench image bump` at {utc_now()}: {how}. provides = measured inside image {entry.image_id[:19]}."
    set_default_base(meta, ref, note, provides)
    reporter.note(f"images/{engine}/image.yaml and Dockerfile now default to {ref}")
    return built
