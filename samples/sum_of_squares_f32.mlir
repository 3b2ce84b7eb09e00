// The squared L2 norm of a vector of 1M f32 (a global gradient norm):
// a reduction to a scalar. tilefuse views x as 512 rows of 2048
// (fusion/scalars.py), squares and sums each row on the row kernel, then
// sums the 512 partials in a second row-kernel dispatch. IREE 3.13's own
// kernel for this on lavapipe sums only the first 65536 elements.
func.func @main(%x: tensor<1048576xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sq = stablehlo.multiply %x, %x : tensor<1048576xf32>
  %s = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<1048576xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
