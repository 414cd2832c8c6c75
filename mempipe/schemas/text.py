"""Text that is text: no lone UTF-16 surrogate (which no UTF-8 store can hold, and which a JSON
parser may turn into ``?`` without a word) and not the noncharacter U+FFFF (which stands for one
where the archive reader met it). A record holding either is a reject, not a record stored with
other text than it had."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_NOT_TEXT = re.compile("[\ud800-\udfff\uffff]")


def sound_text(value: str) -> str:
    found = _NOT_TEXT.search(value)
    if found is not None:
        raise ValueError(
            f"not valid Unicode text at character {found.start()}: a lone UTF-16 surrogate "
            "(an unpaired \\ud800-\\udfff escape)"
        )
    return value


SoundText = Annotated[str, AfterValidator(sound_text)]
