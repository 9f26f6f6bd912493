"""OpenDLA: the command-line application composing tengine_host and accel."""
