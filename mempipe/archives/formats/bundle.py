"""mempipe's bundle: a directory of one file per collection and a manifest, written by
``mempipe export`` and imported verbatim (:mod:`mempipe.services.bundle_import`), never read
record by record as the other formats are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mempipe.archives.drafts import Draft
from mempipe.archives.formats import ClaimedFormat, FileReading
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import FormatKind


class Bundle(ClaimedFormat):
    format = "bundle"
    kind = FormatKind.BUNDLE
    streamed = False

    def drafts(self, reading: FileReading) -> Iterator[Draft]:
        folder = self.path if Path(self.path).is_dir() else str(Path(self.path).parent)
        raise ArchiveError(
            f"{self.path}: a bundle is imported whole (`mempipe import {folder} --format bundle`)"
        )
