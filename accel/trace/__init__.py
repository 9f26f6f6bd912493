"""NVIDIA's register traces: the script format, its players and the runner.

This floor sits above both models it plays traces on and is imported by
neither: :mod:`.script` parses ``.cfg`` / ``.dat`` files, :mod:`.writer`
writes them, :mod:`.cmod_player` plays them on the cmodel, :mod:`.rtl_player`
on the Amaranth engine in simulation, and :mod:`.runner` runs and judges whole
trace directories on either (see ``docs/architecture.md``).
"""
