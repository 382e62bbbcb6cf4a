//! CONTRACT (being implemented): the bin-packing estimator.
