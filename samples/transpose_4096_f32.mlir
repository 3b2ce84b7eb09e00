// Issue #17's transpose benchmark: a 4096x4096 f32 transpose (64 MiB read,
// 64 MiB written). One transpose group; on GPU targets the transpose kernel
// stages tiles through workgroup memory, on lavapipe the loop kernel runs it.
func.func @main(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  return %t : tensor<4096x4096xf32>
}
