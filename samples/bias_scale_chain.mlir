// An elementwise chain with broadcasts: y = relu(x * scale[col] + bias[row]) - x / 4
func.func @main(%x: tensor<257x1000xf32>, %scale: tensor<1000xf32>, %bias: tensor<257xf32>)
    -> tensor<257x1000xf32> {
  %s = stablehlo.broadcast_in_dim %scale, dims = [1] : (tensor<1000xf32>) -> tensor<257x1000xf32>
  %b = stablehlo.broadcast_in_dim %bias, dims = [0] : (tensor<257xf32>) -> tensor<257x1000xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<257x1000xf32>
  %quarter = stablehlo.constant dense<0.25> : tensor<257x1000xf32>
  %0 = stablehlo.multiply %x, %s : tensor<257x1000xf32>
  %1 = stablehlo.add %0, %b : tensor<257x1000xf32>
  %2 = stablehlo.maximum %1, %zero : tensor<257x1000xf32>
  %3 = stablehlo.multiply %x, %quarter : tensor<257x1000xf32>
  %4 = stablehlo.subtract %2, %3 : tensor<257x1000xf32>
  return %4 : tensor<257x1000xf32>
}
