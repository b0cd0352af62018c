//! The loaders never panic, whatever they are given.

use proptest::prelude::*;
use serde_json::Value;
use topology::*;

use crate::fixtures::h200_illustrative;

/// Replaces the value at a pseudo-random position of `tree` with `replacement`.
fn mutate(tree: &mut Value, mut choice: usize, replacement: Value) {
    let mut node = tree;
    loop {
        let children = match node {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => 0,
        };
        if children == 0 || choice % 4 == 0 {
            *node = replacement;
            return;
        }
        let index = (choice / 4) % children;
        choice /= 3;
        node = match node {
            Value::Object(map) => map.values_mut().nth(index).expect("index < len"),
            Value::Array(items) => &mut items[index],
            _ => unreachable!("children > 0 only for containers"),
        };
    }
}

fn arbitrary_json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z_0-9.]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn json_loader_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Topology::from_json_str(&text);
    }

    #[test]
    fn toml_loader_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Topology::from_toml_str(&text);
    }

    #[test]
    fn loaders_never_panic_on_mutated_documents(
        choice in any::<usize>(),
        replacement in arbitrary_json_value(),
    ) {
        let mut tree: Value = serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap();
        mutate(&mut tree, choice, replacement);
        let text = tree.to_string();
        if let Ok(topo) = Topology::from_json_str(&text) {
            // Whatever loads is valid, renders, and writes back to itself.
            prop_assert!(topo.validate().is_ok());
            let _ = render::table(&topo);
            let _ = render::svg(&topo);
            let _ = mt4g::export(&topo);
            let again = Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap();
            prop_assert_eq!(again, topo);
        }
        if let Ok(toml_text) = toml::to_string(&tree) {
            let _ = Topology::from_toml_str(&toml_text);
        }
    }

    #[test]
    fn valid_sizes_round_trip_through_both_formats(
        value in 1u64..(1 << 40),
        extra in 0u64..(1 << 20),
        kind in 0usize..4,
    ) {
        let bound = match kind {
            0 => SizeBound::Exact(Bytes(value)),
            1 => SizeBound::AtLeast(Bytes(value)),
            2 => SizeBound::AtMost(Bytes(value)),
            _ => SizeBound::Between(Bytes(value), Bytes(value + extra)),
        };
        let mut topo = Topology::new(DeviceInfo::new("p", ComputeCapability::new(8, 0), 1));
        topo.element_mut(ElementKind::ConstantL15).set_size(Size {
            bound,
            provenance: Provenance::Benchmark,
            evidence: None,
            conditions: None,
        });
        prop_assert_eq!(&Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap(), &topo);
        prop_assert_eq!(&Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap(), &topo);
    }
}
