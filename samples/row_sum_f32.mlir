// Row sums of a 4096x1000 f32 matrix (rows of 1000 on lavapipe: 31 chunks of
// 32 and a tail of 8). tilefuse compiles the reduce with the row_reduction
// strategy: one workgroup per row, coalesced 128-bit loads, subgroup shuffles.
func.func @main(%x: tensor<4096x1000xf32>) -> tensor<4096xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<4096x1000xf32>, tensor<f32>) -> tensor<4096xf32>
  return %sum : tensor<4096xf32>
}
