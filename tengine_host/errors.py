"""The one base of every error the host engine raises.

:class:`TengineError` (after the engine this package models) is the root;
:class:`TengineInputError` is input the engine cannot use - a model, a
calibration table, an array or an image - and its message names the file or
value at fault and what is allowed.  It stays a ``ValueError`` too, as the
library raised before it had its own errors.
"""

from __future__ import annotations


class TengineError(Exception):
    """Base of every error raised by the ``tengine_host`` package."""


class TengineInputError(TengineError, ValueError):
    """A model, calibration table, array or image the engine cannot use."""


def reason(exc: BaseException, named=None) -> str:
    """What went wrong in ``exc`` for a message that already names the file ``named``: an
    OS error's text without the file name it repeats (``cannot read image 'x.png': Is a
    directory``), keeping the name when the error is about another file."""
    if isinstance(exc, OSError) and exc.strerror:
        other = exc.filename is not None and str(exc.filename) != str(named)
        return f"{exc.strerror} ({exc.filename})" if other else exc.strerror
    return str(exc)
