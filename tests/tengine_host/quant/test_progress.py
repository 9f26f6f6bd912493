"""The progress bar draws on a terminal and stays quiet in logs and pipes."""

import io

from tengine_host.quant.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_quiet_when_not_a_terminal():
    stream = io.StringIO()
    with progress_bar(3, "calibrate", stream=stream) as bar:
        for _ in range(3):
            bar.update()
    assert stream.getvalue() == ""


def test_draws_on_a_terminal_and_counts():
    stream = _Terminal()
    with progress_bar(3, "calibrate", stream=stream) as bar:
        for _ in range(3):
            bar.update()
        assert bar.n == 3
    assert "calibrate" in stream.getvalue() and "/3" in stream.getvalue()


def test_disabled_never_draws():
    stream = _Terminal()
    with progress_bar(3, "calibrate", enabled=False, stream=stream) as bar:
        bar.update(3)
    assert stream.getvalue() == ""
