// 16x4096 @ 4096x4096 f16, epilogue: bias + gelu
func.func @main(%a: tensor<16x4096xf16>, %b: tensor<4096x4096xf16>, %bias: tensor<4096xf16>) -> tensor<16x4096xf16> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<16x4096xf16>, tensor<4096x4096xf16>) -> tensor<16x4096xf16>
    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<4096xf16>) -> tensor<16x4096xf16>
    %1 = stablehlo.add %0, %bb : tensor<16x4096xf16>
    %c0 = stablehlo.constant dense<4.467770e-02> : tensor<f16>
    %k0 = stablehlo.broadcast_in_dim %c0, dims = [] : (tensor<f16>) -> tensor<16x4096xf16>
    %c1 = stablehlo.constant dense<7.978850e-01> : tensor<f16>
    %k1 = stablehlo.broadcast_in_dim %c1, dims = [] : (tensor<f16>) -> tensor<16x4096xf16>
    %c2 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %k2 = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<f16>) -> tensor<16x4096xf16>
    %c3 = stablehlo.constant dense<5.000000e-01> : tensor<f16>
    %k3 = stablehlo.broadcast_in_dim %c3, dims = [] : (tensor<f16>) -> tensor<16x4096xf16>
    %g0 = stablehlo.multiply %1, %1 : tensor<16x4096xf16>
    %g1 = stablehlo.multiply %g0, %1 : tensor<16x4096xf16>
    %g2 = stablehlo.multiply %k0, %g1 : tensor<16x4096xf16>
    %g3 = stablehlo.add %1, %g2 : tensor<16x4096xf16>
    %g4 = stablehlo.multiply %k1, %g3 : tensor<16x4096xf16>
    %g5 = stablehlo.tanh %g4 : tensor<16x4096xf16>
    %g6 = stablehlo.add %k2, %g5 : tensor<16x4096xf16>
    %g7 = stablehlo.multiply %k3, %g6 : tensor<16x4096xf16>
    %g8 = stablehlo.multiply %1, %g7 : tensor<16x4096xf16>
    return %g8 : tensor<16x4096xf16>
}
