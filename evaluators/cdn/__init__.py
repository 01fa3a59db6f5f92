"""The offline CDN mirror: pinned npm packages (`packages.json`, `install`) served in place
of the CDN URLs apps load (`urls` maps a URL to a package file, `mirror` serves it).
``python -m evaluators.cdn install`` sets it up."""

from evaluators.cdn.mirror import (MANIFEST_PATH, CdnMirror, MirrorHit, content_type_for,
                                   default_root, install, load_manifest, response_headers)

__all__ = ["MANIFEST_PATH", "CdnMirror", "MirrorHit", "content_type_for", "default_root",
           "install", "load_manifest", "response_headers"]
