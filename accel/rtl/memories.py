"""What the RTL's memories tell the FPGA flow beyond Amaranth's description of them.

An Amaranth read port that is not transparent returns the old word when the word it
reads is written in the same cycle.  Two ports of an ECP5 block RAM do not promise that,
so yosys keeps the promise with logic of its own: every write delayed a cycle behind
flip-flops, with a bypass into the read data - a flip-flop per bit and a multiplexer,
for every block RAM.  A memory whose users never read a word in the cycle it is written
does not need it: its name ends in :data:`NO_COLLISION`, and the build tells yosys that
such a read may return anything (:data:`fpga.build.COLLISIONS_UNDEFINED`).  Simulation
keeps Amaranth's semantics, so the name is a claim about the design, stated where the
memory is made.
"""

from __future__ import annotations

#: Suffix of the name of a memory never read in the cycle the same word is written.
NO_COLLISION = "_no_collision"
