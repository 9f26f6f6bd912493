"""FPGA board tops and bitstream builds (amaranth-boards + YoWASP yosys/nextpnr)."""
