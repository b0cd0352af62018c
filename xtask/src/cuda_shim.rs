//! `cargo xtask shim [--check]`: generates `crates/cuda-shim/src/entry_points.rs`, the list
//! of driver entry points that the `cuda-shim` crate defines and forwards to the driver
//! loaded at run time (`docs/building.md`).
//!
//! The input is `cust_raw`'s bindgen output (`src/cuda.rs`, found through
//! `cargo metadata`): every `cu*` function declared in an `extern "C"` block, with enum-typed
//! arguments rewritten as the enum's integer representation (a driver or a caller may pass
//! values the enum does not list), the variants of `CUresult` with their codes, and the
//! variants that `cust`'s `ToResult` maps to an error of its own (from cust's
//! `src/error.rs`). `--check` fails when the committed file differs from what the bindings
//! give, so a new `cust_raw` with more entry points cannot go unnoticed.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use quote::ToTokens;
use syn::{FnArg, ForeignItem, Item, Pat, ReturnType, Type, UseTree};

/// The entry points `cuda-shim` forwards by hand (they must also work with no driver).
const OWN: &[&str] = &["cuGetErrorName", "cuGetErrorString"];

/// The generated file, relative to the workspace.
const OUTPUT: &str = "crates/cuda-shim/src/entry_points.rs";

/// One `extern "C"` function of the bindings.
#[derive(Debug, PartialEq)]
pub struct EntryPoint {
    /// Its symbol.
    pub name: String,
    /// `(argument, type)`, enum types already replaced by their representation.
    pub args: Vec<(String, String)>,
}

/// What the generator reads from the bindings.
#[derive(Debug)]
pub struct Bindings {
    /// Every `cu*` function, in the bindings' order, without duplicates.
    pub entry_points: Vec<EntryPoint>,
    /// `CUresult`'s variants and codes.
    pub codes: Vec<(String, i64)>,
}

/// Prints a type compactly: `*mut CUcontext`, `c_uint`.
fn type_text(ty: &Type) -> String {
    ty.to_token_stream()
        .to_string()
        .replace(":: std :: os :: raw :: ", "")
        .replace(":: std :: ffi :: ", "")
        .replace(" :: ", "::")
        .replace("* mut ", "*mut ")
        .replace("* const ", "*const ")
        .replace(" ,", ",")
}

/// The last identifier of a plain path type (`CUresult`), if it is one.
fn path_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            Some(p.path.segments[0].ident.to_string())
        }
        _ => None,
    }
}

/// Parses cust_raw's bindings.
pub fn parse_bindings(text: &str) -> Result<Bindings, String> {
    let file = syn::parse_file(text).map_err(|e| format!("cannot parse the bindings: {e}"))?;
    let mut enums: BTreeMap<String, String> = BTreeMap::new();
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    let mut codes = Vec::new();
    let mut entry_points: Vec<EntryPoint> = Vec::new();
    for item in &file.items {
        match item {
            Item::Enum(e) => {
                let repr = e
                    .attrs
                    .iter()
                    .find(|a| a.path().is_ident("repr"))
                    .and_then(|a| a.parse_args::<syn::Ident>().ok())
                    .map(|i| i.to_string())
                    .ok_or_else(|| format!("enum {} has no integer repr", e.ident))?;
                if e.ident == "cudaError_enum" {
                    for v in &e.variants {
                        let code = match &v.discriminant {
                            Some((_, syn::Expr::Lit(l))) => match &l.lit {
                                syn::Lit::Int(i) => i.base10_parse::<i64>().ok(),
                                _ => None,
                            },
                            _ => None,
                        }
                        .ok_or_else(|| format!("CUresult variant {} has no code", v.ident))?;
                        codes.push((v.ident.to_string(), code));
                    }
                }
                enums.insert(e.ident.to_string(), repr);
            }
            Item::Type(t) => {
                if let Some(target) = path_ident(&t.ty) {
                    aliases.insert(t.ident.to_string(), target);
                }
            }
            Item::Use(u) => {
                if let UseTree::Path(p) = &u.tree {
                    if let UseTree::Rename(r) = p.tree.as_ref() {
                        aliases.insert(r.rename.to_string(), r.ident.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    let enum_repr = |ty: &Type| -> Option<String> {
        let mut name = path_ident(ty)?;
        for _ in 0..16 {
            if let Some(repr) = enums.get(&name) {
                return Some(repr.clone());
            }
            name = aliases.get(&name)?.clone();
        }
        None
    };
    for item in &file.items {
        let Item::ForeignMod(block) = item else {
            continue;
        };
        for foreign in &block.items {
            let ForeignItem::Fn(f) = foreign else {
                continue;
            };
            let name = f.sig.ident.to_string();
            if !name.starts_with("cu") || entry_points.iter().any(|e| e.name == name) {
                continue;
            }
            if f.sig.variadic.is_some() {
                return Err(format!("{name} is variadic"));
            }
            let returns_result = match &f.sig.output {
                ReturnType::Type(_, ty) => {
                    enum_repr(ty).is_some()
                        && path_ident(ty).is_some_and(|n| n == "CUresult" || n == "cudaError_enum")
                }
                ReturnType::Default => false,
            };
            if !returns_result {
                return Err(format!("{name} does not return CUresult"));
            }
            let mut args = Vec::new();
            for input in &f.sig.inputs {
                let FnArg::Typed(arg) = input else {
                    return Err(format!("{name} has a receiver"));
                };
                let Pat::Ident(ident) = arg.pat.as_ref() else {
                    return Err(format!("{name} has an argument without a name"));
                };
                let ty = enum_repr(&arg.ty).unwrap_or_else(|| type_text(&arg.ty));
                args.push((ident.ident.to_string(), ty));
            }
            entry_points.push(EntryPoint { name, args });
        }
    }
    if entry_points.len() < 100 || codes.len() < 20 {
        return Err(format!(
            "found only {} entry points and {} error codes: the bindings changed shape",
            entry_points.len(),
            codes.len()
        ));
    }
    for own in OWN {
        if !entry_points.iter().any(|e| e.name == *own) {
            return Err(format!("the bindings do not declare {own}"));
        }
    }
    Ok(Bindings {
        entry_points,
        codes,
    })
}

/// The `CUresult` variants that cust's `ToResult for cudaError_enum` names, in its order.
pub fn cust_known_codes(error_rs: &str) -> Result<Vec<String>, String> {
    let start = error_rs
        .find("impl ToResult for cudaError_enum")
        .ok_or("cust's error.rs has no `impl ToResult for cudaError_enum`")?;
    let known: Vec<String> = error_rs[start..]
        .split("cudaError_enum::")
        .skip(1)
        .filter_map(|rest| {
            let name = crate::cuda_stub::leading_identifier(rest);
            rest[name.len()..]
                .trim_start()
                .starts_with("=>")
                .then_some(name)
        })
        .collect();
    if known.len() < 20 {
        return Err(format!(
            "found only {} codes in cust's ToResult",
            known.len()
        ));
    }
    Ok(known)
}

fn signature_lines(out: &mut String, e: &EntryPoint) {
    let args: Vec<String> = e.args.iter().map(|(a, t)| format!("{a}: {t}")).collect();
    let line = format!("        fn {}({});\n", e.name, args.join(", "));
    if line.len() <= 101 {
        out.push_str(&line);
    } else {
        out.push_str(&format!("        fn {}(\n", e.name));
        for arg in args {
            out.push_str(&format!("            {arg},\n"));
        }
        out.push_str("        );\n");
    }
}

/// The generated Rust source.
pub fn render(bindings: &Bindings, cust_known: &[String]) -> Result<String, String> {
    for name in cust_known {
        if !bindings.codes.iter().any(|(v, _)| v == name) {
            return Err(format!("cust knows {name}, which CUresult does not list"));
        }
    }
    let mut out = String::from(
        "//! Generated by `cargo xtask shim` from cust_raw's bindings and cust's error conversion;\n\
         //! do not edit. `cargo xtask shim --check` proves it current.\n\
         //!\n\
         //! Enum-typed arguments appear as the enum's integer representation.\n\
         \n\
         #![allow(clippy::wildcard_imports)]\n\
         \n\
         use std::os::raw::*;\n\
         \n\
         use cust_raw::*;\n\
         \n\
         driver_api! {\n    forwarded {\n",
    );
    for e in &bindings.entry_points {
        if !OWN.contains(&e.name.as_str()) {
            signature_lines(&mut out, e);
        }
    }
    out.push_str("    }\n    own {\n");
    for e in &bindings.entry_points {
        if OWN.contains(&e.name.as_str()) {
            signature_lines(&mut out, e);
        }
    }
    out.push_str("    }\n}\n\nerror_codes! {\n    listed {\n");
    for (variant, code) in &bindings.codes {
        out.push_str(&format!("        {variant} = {code},\n"));
    }
    out.push_str("    }\n    known_to_cust {\n");
    for name in cust_known {
        out.push_str(&format!("        {name},\n"));
    }
    out.push_str("    }\n}\n");
    Ok(out)
}

/// The file as it should be, from the bindings of the locked cust_raw and cust.
pub fn generate(workspace: &Path) -> Result<String, String> {
    let read = |path: PathBuf| {
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let bindings = parse_bindings(&read(
        crate::metadata::package_dir(workspace, "cust_raw")?.join("src/cuda.rs"),
    )?)?;
    let known = cust_known_codes(&read(
        crate::metadata::package_dir(workspace, "cust")?.join("src/error.rs"),
    )?)?;
    render(&bindings, &known)
}

/// `cargo xtask shim [--check]`.
pub fn run_shim(workspace: &Path, args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => return Err("usage: cargo xtask shim [--check]".into()),
    };
    let text = generate(workspace)?;
    let path = workspace.join(OUTPUT);
    if check {
        let committed = fs::read_to_string(&path).unwrap_or_default();
        if committed != text {
            return Err(format!(
                "{OUTPUT} is not what cust_raw's bindings give: run `cargo xtask shim`"
            ));
        }
        eprintln!("xtask: {OUTPUT} is up to date");
    } else {
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("xtask: wrote {OUTPUT}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BINDINGS: &str = "
        #[repr(i32)] pub enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 }
        pub use self::cudaError_enum as CUresult;
        #[repr(u32)] pub enum CUdevice_attribute_enum { A = 1 }
        pub type CUdevice_attribute = CUdevice_attribute_enum;
        extern \"C\" { pub fn cuInit(Flags: ::std::os::raw::c_uint) -> CUresult; }
        extern \"C\" {
            pub fn cuDeviceGetAttribute(pi: *mut ::std::os::raw::c_int, attrib: CUdevice_attribute, dev: CUdevice) -> CUresult;
        }
        extern \"C\" { pub fn cuInit(Flags: ::std::os::raw::c_uint) -> CUresult; }
    ";

    #[test]
    fn entry_points_enums_and_codes_are_read() {
        // The real bindings have hundreds; the shape check would refuse this small sample,
        // so parse it the same way with the check lowered by padding.
        let mut text = BINDINGS.to_string();
        for i in 0..120 {
            text.push_str(&format!(
                "extern \"C\" {{ pub fn cuPad{i}(e: CUresult) -> CUresult; }}\n"
            ));
        }
        let variants: String = (2..40)
            .map(|i| format!("#[repr(i32)] pub enum E{i} {{ X = 0 }}\n"))
            .collect();
        text.push_str(&variants);
        let text = text.replace(
            "CUDA_ERROR_INVALID_VALUE = 1 }",
            &format!(
                "CUDA_ERROR_INVALID_VALUE = 1, {} }}",
                (2..30)
                    .map(|i| format!("C{i} = {i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let text = format!(
            "{text}\nextern \"C\" {{ pub fn cuGetErrorName(error: CUresult, pStr: *mut *const ::std::os::raw::c_char) -> CUresult; }}\n\
             extern \"C\" {{ pub fn cuGetErrorString(error: CUresult, pStr: *mut *const ::std::os::raw::c_char) -> CUresult; }}\n"
        );
        let b = parse_bindings(&text).unwrap();
        assert_eq!(b.entry_points[0].name, "cuInit");
        assert_eq!(
            b.entry_points[0].args,
            vec![("Flags".to_string(), "c_uint".to_string())]
        );
        let attr = &b.entry_points[1];
        assert_eq!(attr.name, "cuDeviceGetAttribute");
        assert_eq!(attr.args[0].1, "*mut c_int");
        assert_eq!(
            attr.args[1].1, "u32",
            "enum arguments become their representation"
        );
        assert_eq!(
            b.entry_points[2].args[0].1, "i32",
            "CUresult is an i32 enum"
        );
        assert_eq!(
            b.entry_points.iter().filter(|e| e.name == "cuInit").count(),
            1,
            "declared twice, listed once"
        );
        assert_eq!(b.codes[1], ("CUDA_ERROR_INVALID_VALUE".to_string(), 1));
        let src = render(&b, &["CUDA_SUCCESS".to_string()]).unwrap();
        assert!(src.contains("        fn cuInit(Flags: c_uint);\n"));
        assert!(src.contains("    own {\n        fn cuGetErrorName("));
        assert!(!src.contains("    forwarded {\n        fn cuGetErrorName("));
        assert!(render(&b, &["CUDA_ERROR_NEWER".to_string()]).is_err());
    }

    #[test]
    fn a_function_not_returning_cuda_result_is_refused() {
        let text = "#[repr(i32)] pub enum cudaError_enum { CUDA_SUCCESS = 0 }\n\
                    extern \"C\" { pub fn cuOdd() -> u32; }";
        assert!(parse_bindings(text).unwrap_err().contains("cuOdd"));
    }

    #[test]
    fn cust_known_codes_are_read_from_its_to_result() {
        let mut text = String::from("impl ToResult for cudaError_enum {\n match self {\n");
        for i in 0..25 {
            text.push_str(&format!("cudaError_enum::CODE_{i} => Err(CudaError::X),\n"));
        }
        text.push_str("cudaError_enum::LONG_ONE => {\n Err(CudaError::Y)\n }\n _ => Err(CudaError::UnknownError),\n}}");
        let known = cust_known_codes(&text).unwrap();
        assert_eq!(known.len(), 26);
        assert_eq!(known.last().unwrap(), "LONG_ONE");
    }

    #[test]
    fn the_committed_list_matches_the_locked_bindings() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let committed = fs::read_to_string(workspace.join(OUTPUT)).unwrap();
        assert!(
            committed == generate(workspace).unwrap(),
            "{OUTPUT} is stale: run `cargo xtask shim`"
        );
    }
}
