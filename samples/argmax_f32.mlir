// jnp.argmax(x, axis=1) over a 4096x1000 f32 matrix, as JAX lowers it: a
// variadic reduce of (x, iota) whose body keeps the larger value (a NaN
// first) and, on ties, the smaller index. tilefuse rewrites it as two row
// reductions over integer keys of x (python/tilefuse/fusion/argminmax.py)
// and runs both in one dispatch with the softmax strategy.
func.func @main(%x: tensor<4096x1000xf32>) -> tensor<4096xi32> {
  %iota = stablehlo.iota dim = 1 : tensor<4096x1000xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%iota init: %zero) across dimensions = [1]
      : (tensor<4096x1000xf32>, tensor<4096x1000xi32>, tensor<f32>, tensor<i32>)
        -> (tensor<4096xf32>, tensor<4096xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ai: tensor<i32>, %bi: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %pick = stablehlo.or %gt, %nan : tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %ai, %bi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %pick_index = stablehlo.or %pick, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
    %i = stablehlo.select %pick_index, %ai, %bi : tensor<i1>, tensor<i32>
    stablehlo.return %v, %i : tensor<f32>, tensor<i32>
  }
  return %r#1 : tensor<4096xi32>
}
