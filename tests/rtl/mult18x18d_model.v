// Behavioural model of the part of Lattice ECP5's MULT18X18D (sysDSP 18x18 multiplier)
// that accel/rtl/cmac.py's ecp5_multiply instantiates, for simulating the CMAC as the
// FPGA build has it; yosys ships the primitive only as a black box.  Written from the
// ECP5 sysDSP usage guide (Lattice TN1267): P = A x B, each operand signed when its
// SIGNED pin is 1; A (with SIGNEDA), B (with SIGNEDB) and P each go through a register
// when the REG_..._CLK parameter names a clock, taking a new value only while the clock
// enable its REG_..._CE parameter names is 1.  Only CLK0, RST0, synchronous reset and the
// enables CE0 (every register) and CE1 (B's) are modelled; any other setting stops the
// simulation.
`timescale 1ns/1ps
module MULT18X18D (
    input A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0,
    input B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0,
    input C17, C16, C15, C14, C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input CLK0, CLK1, CLK2, CLK3, CE0, CE1, CE2, CE3, RST0, RST1, RST2, RST3,
    output P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter GSR = "ENABLED";
    parameter RESETMODE = "SYNC";

    wire [17:0] a_in = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b_in = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_reg = 0, b_reg = 0;
    reg sa_reg = 0, sb_reg = 0;
    reg [35:0] p_reg = 0;

    initial begin
        if ((REG_INPUTA_CLK != "NONE" && REG_INPUTA_CLK != "CLK0")
                || (REG_INPUTB_CLK != "NONE" && REG_INPUTB_CLK != "CLK0")
                || (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0")
                || REG_PIPELINE_CLK != "NONE" || RESETMODE != "SYNC"
                || REG_INPUTA_CE != "CE0" || REG_OUTPUT_CE != "CE0"
                || (REG_INPUTB_CE != "CE0" && REG_INPUTB_CE != "CE1")
                || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0"
                || REG_OUTPUT_RST != "RST0") begin
            $display("MULT18X18D model: a setting outside the modelled subset");
            $finish;
        end
    end

    wire ce_b = REG_INPUTB_CE == "CE1" ? CE1 : CE0;
    always @(posedge CLK0) begin
        if (RST0) begin
            a_reg <= 0; sa_reg <= 0; b_reg <= 0; sb_reg <= 0;
        end else begin
            if (CE0) begin
                a_reg <= a_in; sa_reg <= SIGNEDA;
            end
            if (ce_b) begin
                b_reg <= b_in; sb_reg <= SIGNEDB;
            end
        end
    end
    wire [17:0] a = REG_INPUTA_CLK == "NONE" ? a_in : a_reg;
    wire [17:0] b = REG_INPUTB_CLK == "NONE" ? b_in : b_reg;
    wire sa = REG_INPUTA_CLK == "NONE" ? SIGNEDA : sa_reg;
    wire sb = REG_INPUTB_CLK == "NONE" ? SIGNEDB : sb_reg;
    // each operand extended to 36 bits as its SIGNED pin says, the product's low 36 bits
    wire [35:0] a_ext = {{18{sa & a[17]}}, a};
    wire [35:0] b_ext = {{18{sb & b[17]}}, b};
    wire [35:0] product = a_ext * b_ext;
    always @(posedge CLK0) begin
        if (RST0) p_reg <= 0;
        else if (CE0) p_reg <= product;
    end
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = REG_OUTPUT_CLK == "NONE" ? product : p_reg;
endmodule
