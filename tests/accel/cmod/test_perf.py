"""The convolution's cycle estimate (accel.cmod.perf.conv_cycles), by hand on nv_small:
ATOMIC_C = ATOMIC_K = 8, an 8-byte memory bus, STRIPE_POINTS = 16."""

from accel.cmod.perf import conv_cycles
from accel.config import get_preset

NV_SMALL = get_preset("nv_small")


def test_rounds_shorter_than_their_kernel_loads_last_the_loads():
    # NVIDIA's dc_8x8x36_4x4x36x16_dilation: 2x2 outputs, 16 kernels of 36 channels, 4x4.
    # 2 kernel groups x 5 channel groups x 16 taps = 160 rounds of 4 points, each lasting
    # its 8 kernel loads: 1280 cycles.  The bus: 2304 input + 9216 weight bytes = 1440.
    # In order: the first group ends once the input and its 4608 weight bytes are in
    # (864 cycles), the second group's 640 follow: 1504
    cycles, atoms = conv_cycles(NV_SMALL, (2, 2), (16, 36, 4, 4), 2304, 9216)
    assert (cycles, atoms) == (864 + 640, 640)


def test_stripes_of_sixteen_points_hide_the_loads():
    # 8x8 outputs of a 10x10 input: 4 stripes of 16 points; 8 kernels, 8 channels, 3x3:
    # 4 x 9 rounds of 16 atoms = 576; the bus: 800 input + 576 weight bytes = 172 cycles
    cycles, atoms = conv_cycles(NV_SMALL, (8, 8), (8, 8, 3, 3), 8 * 10 * 10, 8 * 8 * 9)
    assert (cycles, atoms) == (576, 576)


def test_unequal_stripes_and_a_partial_last_kernel_group():
    # 17 points: stripes of 9 and 8; 9 kernels: groups of 8 and 1, 8 channels, 1x1.
    # First group: max(9, 8) + max(8, 8) = 17, second: 9 + 8 = 17 -> 34 = the atoms.
    # 1 point, same kernels: max(1, 8) + max(1, 1) = 9 rounds' cycles against 2 atoms;
    # the bus moves 8 + 72 bytes in 10 cycles; in order: 8 + 64 bytes (9 cycles), then 1
    assert conv_cycles(NV_SMALL, (1, 17), (9, 8, 1, 1), 0, 0) == (34, 34)
    assert conv_cycles(NV_SMALL, (1, 1), (9, 8, 1, 1), 8, 72) == (10, 2)
    assert conv_cycles(NV_SMALL, (1, 1), (9, 8, 1, 1), 0, 0) == (9, 2)


def test_the_fused_sdp_stripe_follows_the_rounds():
    # 1 point, 8 kernels of 8 channels, 1x1: one round of 8 loads; SDP's 8 elements at 1
    # per cycle pass after it: 8 + 8
    assert conv_cycles(NV_SMALL, (1, 1), (8, 8, 1, 1), 0, 0, sdp=8) == (16, 1)
