// Steps every strategy shares, as named sequences a strategy reaches by
// `transform.include`. A strategy file declares each one it uses (a
// named_sequence without a body, so the file parses on its own); the library
// the driver writes (python/tilefuse/strategies/library.py) and `tilefuse
// flags` carry the definitions below, once.
module attributes {transform.with_named_sequence} {
  // The dispatch's function and its root: the op whose result the dispatch
  // stores. IREE hands a strategy the dispatch's module on SPIR-V and the
  // function itself on CUDA, where results leave through
  // iree_codegen.store_to_buffer instead of dispatch.tensor.store. A root
  // with several results (a multi-output loop group: y and y * y both
  // returned) has one store per result: it is kept once.
  transform.named_sequence @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op) {
    %stores = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.store", "iree_codegen.store_to_buffer"]} in %dispatch
      : (!transform.any_op) -> !transform.any_op
    %func = transform.get_parent_op %stores <{deduplicate, op_name = "func.func"}>
      : (!transform.any_op) -> !transform.any_op
    %root_per_store = transform.get_producer_of_operand %stores[0]
      : (!transform.any_op) -> !transform.any_op
    %root = transform.merge_handles deduplicate %root_per_store : !transform.any_op
    transform.yield %func, %root : !transform.any_op, !transform.any_op
  }

  // Masked vectors (a ragged edge tile, a pad read through its source's
  // bounds) lowered to what the SPIR-V and NVVM back ends take. Multi-dim
  // masks are built from 1-D ones in a pattern set of their own first: this
  // LLVM folds shape_cast/extract of `create_mask %c1, %n, %c1 :
  // vector<1x1x1xi1>` to an all-true mask, dropping %n, so a multi-dim mask
  // must be lowered before cast_away_vector_leading_one_dim reshapes it
  // (docs/findings.md, 'Multi-dim vector masks'). Then the leading unit
  // dims are cast away and masked transfers made 1-D. With no masks only
  // the cast applies.
  transform.named_sequence @tilefuse_lower_masks(%func: !transform.any_op {transform.readonly}) {
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_masks
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }

  // The no-ops a strategy chooses for an optional step it does not need
  // (a `transform.include` carrying `tilefuse.step`, strategies/library.py):
  // a step that hands a handle on passes its input through, one that
  // yields nothing does nothing.
  transform.named_sequence @tilefuse_pass(%handle: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    transform.yield %handle : !transform.any_op
  }
  transform.named_sequence @tilefuse_skip(%handle: !transform.any_op {transform.readonly}) {
    transform.yield
  }
}
