// 4096x4096 @ 4096x4096 bf16, epilogue: bias
func.func @main(%a: tensor<4096x4096xbf16>, %b: tensor<4096x4096xbf16>, %bias: tensor<4096xbf16>) -> tensor<4096x4096xbf16> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4096x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<4096xbf16>) -> tensor<4096x4096xbf16>
    %1 = stablehlo.add %0, %bb : tensor<4096x4096xbf16>
    return %1 : tensor<4096x4096xbf16>
}
