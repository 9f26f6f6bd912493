"""tengine_host: the host inference engine (modelled on Tengine's lifecycle).

init -> create graph -> prerun -> run -> postrun, as a Python library::

    from tengine_host.model import load_model          # ONNX import + default passes
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.quant import calibrate, load_table

    graph = load_model("tengine_host/models/lenet5_digits.onnx")
    with Executor(graph, [get_device("cpu")]) as ex:    # prerun ... postrun
        probs = ex.run({"input": x})["probs"]

Modules: ``frontend`` (ONNX), ``ops`` (one registry of fp32 ops), ``passes``,
``quant`` (calibration, scale table, parameters), ``partition``, ``devices``
(``cpu``; ``nvdla``), ``executor``.  The graph IR they share with the compiler
is :mod:`accel.ir`, the int8 golden :mod:`accel.golden`.  Nothing is imported
here, so importing a submodule stays cheap.
"""
