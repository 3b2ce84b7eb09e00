// 1024x1024 @ 1024x1024 bf16, epilogue: bias
func.func @main(%a: tensor<1024x1024xbf16>, %b: tensor<1024x1024xbf16>, %bias: tensor<1024xbf16>) -> tensor<1024x1024xbf16> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
    %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<1024xbf16>) -> tensor<1024x1024xbf16>
    %1 = stablehlo.add %0, %bb : tensor<1024x1024xbf16>
    return %1 : tensor<1024x1024xbf16>
}
