// A small column sum: 512x1000 f32 summed over the rows into f32[1000]. 1000
// columns fill only two workgroups, so the kernel splits the 512 rows over
// thread y and combines the partials in workgroup memory.
func.func @main(%x: tensor<512x1000xf32>) -> tensor<1000xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
    : (tensor<512x1000xf32>, tensor<f32>) -> tensor<1000xf32>
  return %sum : tensor<1000xf32>
}
