"""mempipe's bundle: a directory of one file per collection and a manifest, written by
``mempipe export`` and imported verbatim (:mod:`mempipe.services.bundle_import`), never read
record by record as the other formats are."""

from __future__ import annotations

from collections.abc import Iterator

from mempipe.archives.drafts import Draft
from mempipe.archives.formats import ClaimedFormat, FileReading
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import FormatKind


class Bundle(ClaimedFormat):
    format = "bundle"
    kind = FormatKind.BUNDLE
    streamed = False

    def drafts(self, reading: FileReading) -> Iterator[Draft]:
        raise ArchiveError(
            f"{self.path}: a bundle is imported whole (`mempipe import --format bundle`)"
        )
