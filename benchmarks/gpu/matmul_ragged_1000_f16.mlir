// 1000x1000 @ 1000x1000 f16, epilogue: bias
func.func @main(%a: tensor<1000x1000xf16>, %b: tensor<1000x1000xf16>, %bias: tensor<1000xf16>) -> tensor<1000x1000xf16> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1000x1000xf16>, tensor<1000x1000xf16>) -> tensor<1000x1000xf16>
    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<1000xf16>) -> tensor<1000x1000xf16>
    %1 = stablehlo.add %0, %bb : tensor<1000x1000xf16>
    return %1 : tensor<1000x1000xf16>
}
