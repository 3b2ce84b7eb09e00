// 1x4096 @ 4096x4096 bf16 (B stored as 4096x4096)
func.func @main(%a: tensor<1x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<1x4096xbf16> {
    %b = stablehlo.transpose %w, dims = [1, 0] : (tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<1x4096xbf16>
    return %0 : tensor<1x4096xbf16>
}
