// Issue #17's attention head split: [batch, seq, heads, head_dim] to
// [batch, heads, seq, head_dim] (permutation 0213) of 8x2048x16x64 f32
// (64 MiB each way). The innermost dim stays: each 64-wide row moves whole.
func.func @main(%x: tensor<8x2048x16x64xf32>) -> tensor<8x16x2048x64xf32> {
  %t = stablehlo.transpose %x, dims = [0, 2, 1, 3] : (tensor<8x2048x16x64xf32>) -> tensor<8x16x2048x64xf32>
  return %t : tensor<8x16x2048x64xf32>
}
