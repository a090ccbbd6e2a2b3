"""Safe text as a rich Text for the console's panels (reports/safe_text.py does the cleaning)."""

from __future__ import annotations

from rich.ansi import AnsiDecoder
from rich.text import Text

from neurondesk.reports.safe_text import clean


def safe_text(s: str, style: str = "", **text_kwargs) -> Text:
    """A rich Text of `s` made safe, its colours (SGR) rendered as styles, the rest dropped."""
    s = clean(s, sgr=True)
    if "\x1b" not in s:
        return Text(s, style=style, **text_kwargs)
    t = AnsiDecoder().decode_line(s)
    out = Text(style=style, **text_kwargs)
    out.append_text(t)
    return out
