"""OpenDLA accelerator side: config, arithmetic, layout, registers, cmodel, loadable,
runtime, compiler, RTL."""
