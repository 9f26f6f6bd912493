"""The int8 CPU golden: what the DLA computes, written as plain NCHW numpy.

:mod:`.int8_ref` (convolution / fully-connected through CACC and SDP, SDP
programs and LUTs, pooling, element-wise) and :mod:`.int8_lrn` (CDP's LRN)
are written from the pipeline description, deliberately sharing no code with
the cmodel or :mod:`accel.arith`: they are the independent second
implementation every compiled DLA op must match bit for bit.

They sit on the bottom floor of ``accel`` and import nothing of the project,
so that both users import them downward: the compiler's op table evaluates
its plans with them (:func:`accel.compiler.run_reference`) and the host's int8
CPU device reaches them through the compiler.  Placing them under
``accel.compiler`` would tie the golden to the code it judges; leaving them in
``tengine_host`` made the compiler import the host (see
``docs/architecture.md``).
"""
