//! The chunked TLB region (`cuda::vmm`) against the scriptable stand-in driver that
//! `cargo xtask test` loads on a machine without a GPU (`MEMTOPO_STAND_IN`): a region is
//! built and released when every call succeeds, with the driver calls its plan asks for,
//! and each failing call of the virtual memory management API is its own [`VmmError`]. On
//! a machine with a real driver the stand-in is not loaded and this test has nothing to
//! script.
#![cfg(feature = "cuda")]

use pchase_runner::{
    cuda::vmm::ChunkedRegion,
    walk::{VmmError, CHUNKED_POOL_CHUNKS},
};

/// Every VMM call succeeding, then `extra` (`name=code`, later entries win).
fn script(extra: &str) {
    let ok = [
        "cuMemGetAllocationGranularity",
        "cuMemCreate",
        "cuMemAddressReserve",
        "cuMemMap",
        "cuMemRelease",
        "cuMemSetAccess",
        "cuMemUnmap",
        "cuMemAddressFree",
    ];
    // The stand-in takes the first entry of a name: the failing one goes first.
    let mut entries: Vec<String> = vec![extra.to_owned()];
    entries.extend(ok.iter().map(|name| format!("{name}=0")));
    std::env::set_var("MEMTOPO_STAND_IN", entries.join(","));
}

#[test]
fn every_failing_vmm_call_is_a_typed_error_and_a_good_region_is_released() {
    if std::env::var_os("MEMTOPO_STAND_IN_LOADED").is_none() {
        eprintln!("skipped: no stand-in driver loaded");
        return;
    }
    script("");
    let region = ChunkedRegion::new(0, 9 << 20).expect("every call succeeds");
    assert_eq!(
        (region.base(), region.bytes(), region.chunk_bytes()),
        (1 << 44, 8 << 20, 2 << 20)
    );
    // Four places, each its own chunk; one piece of access, and one unmap on release.
    let calls = region.release().expect("released");
    assert_eq!(
        (
            calls.create,
            calls.map,
            calls.release,
            calls.set_access,
            calls.unmap
        ),
        (4, 4, 4, 1, 1)
    );
    // 40 GiB of 2 MiB places over the pool: 2025 chunks created, 20,480 places mapped,
    // access and unmapping in three pieces of at most 16 GiB.
    let region = ChunkedRegion::new(0, 40 << 30).expect("every call succeeds");
    assert_eq!(
        (region.bytes(), region.backing_bytes()),
        (40 << 30, CHUNKED_POOL_CHUNKS * (2 << 20))
    );
    let built = region.calls();
    assert_eq!(
        (
            built.create,
            built.map,
            built.release,
            built.set_access,
            built.unmap
        ),
        (CHUNKED_POOL_CHUNKS, 20_480, CHUNKED_POOL_CHUNKS, 3, 0)
    );
    assert_eq!(region.release().expect("released").unmap, 3);

    script("cuMemGetAllocationGranularity=1");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(matches!(e, VmmError::Granularity(_)), "{e}");
    script("cuMemCreate=2");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(
        matches!(
            e,
            VmmError::Create {
                chunk: 0,
                chunks: 4,
                ..
            }
        ),
        "{e}"
    );
    script("cuMemAddressReserve=2");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(
        matches!(e, VmmError::Reserve { bytes, .. } if bytes == 8 << 20),
        "{e}"
    );
    script("cuMemMap=1");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(matches!(e, VmmError::Map { offset: 0, .. }), "{e}");
    script("cuMemRelease=1");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(
        matches!(
            e,
            VmmError::Release {
                call: "cuMemRelease",
                ..
            }
        ),
        "{e}"
    );
    script("cuMemSetAccess=1");
    let e = ChunkedRegion::new(0, 9 << 20).unwrap_err();
    assert!(matches!(e, VmmError::SetAccess { .. }), "{e}");
    let e = ChunkedRegion::new(0, 1 << 20).unwrap_err();
    assert!(
        matches!(e, VmmError::Reserve { .. }),
        "below one chunk: {e}"
    );

    // A refused unmap of the whole range is retried place by place; those failing too is
    // the error.
    script("cuMemUnmap=1");
    let region = ChunkedRegion::new(0, 4 << 20).expect("built");
    let e = region.release().unwrap_err();
    assert!(
        matches!(
            e,
            VmmError::Release {
                call: "cuMemUnmap",
                ..
            }
        ),
        "{e}"
    );
    an_aliased_region_spans_more_places_than_chunks_and_refuses_a_bad_chunk();
}

/// Part of the test above (the stand-in's script is one environment variable for the
/// whole process, so the VMM tests run as one).
fn an_aliased_region_spans_more_places_than_chunks_and_refuses_a_bad_chunk() {
    script("");
    // 64 MiB of addresses over two 8 MiB chunks: eight places.
    let region = ChunkedRegion::aliased(0, 64 << 20, 8 << 20, 2).expect("every call succeeds");
    assert_eq!(
        (region.bytes(), region.backing_bytes(), region.chunk_bytes()),
        (64 << 20, 16 << 20, 8 << 20)
    );
    let calls = region.release().expect("released");
    assert_eq!((calls.create, calls.map, calls.unmap), (2, 8, 1));
    // A chunk that is no multiple of the 2 MiB granularity, and a range below one chunk.
    let e = ChunkedRegion::aliased(0, 64 << 20, 3 << 20, 2).unwrap_err();
    assert!(
        matches!(e, VmmError::BadGranularity(b) if b == 3 << 20),
        "{e}"
    );
    let e = ChunkedRegion::aliased(0, 4 << 20, 8 << 20, 2).unwrap_err();
    assert!(matches!(e, VmmError::Reserve { .. }), "{e}");
    script("cuMemMap=1");
    let e = ChunkedRegion::aliased(0, 64 << 20, 8 << 20, 2).unwrap_err();
    assert!(matches!(e, VmmError::Map { offset: 0, .. }), "{e}");
}
