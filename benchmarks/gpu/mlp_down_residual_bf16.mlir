// 2048x3072 @ 3072x768 bf16, epilogue: bias + residual
func.func @main(%a: tensor<2048x3072xbf16>, %b: tensor<3072x768xbf16>, %bias: tensor<768xbf16>, %res: tensor<2048x768xbf16>) -> tensor<2048x768xbf16> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2048x3072xbf16>, tensor<3072x768xbf16>) -> tensor<2048x768xbf16>
    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<768xbf16>) -> tensor<2048x768xbf16>
    %1 = stablehlo.add %0, %bb : tensor<2048x768xbf16>
    %r = stablehlo.add %1, %res : tensor<2048x768xbf16>
    return %r : tensor<2048x768xbf16>
}
