//! A small PTX writer: entry signatures from the catalogue, instruction lines, and register
//! declarations collected from the names used.
//!
//! Registers follow a naming convention instead of being declared by hand: `%r_*` is a 32-bit
//! register, `%rd_*` a 64-bit one and `%p_*` a predicate. Any other `%name` must be a special
//! register the generator knows, so a typo fails generation instead of producing PTX that
//! `ptxas` rejects (or, worse, accepts with a different meaning).

use std::fmt::Write as _;

use pchase_kernels::{Kernel, ParamType};

/// Special registers the templates may read.
const SPECIAL_REGISTERS: &[&str] = &[
    "%tid",
    "%ntid",
    "%ctaid",
    "%nctaid",
    "%smid",
    "%clock",
    "%clock64",
    "%globaltimer",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%clusterid",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegClass {
    Pred,
    B32,
    B64,
}

impl RegClass {
    fn of(name: &str) -> Option<Self> {
        if name.starts_with("%rd_") {
            Some(RegClass::B64)
        } else if name.starts_with("%r_") {
            Some(RegClass::B32)
        } else if name.starts_with("%p_") {
            Some(RegClass::Pred)
        } else {
            None
        }
    }

    fn ptx(self) -> &'static str {
        match self {
            RegClass::Pred => ".pred",
            RegClass::B32 => ".b32",
            RegClass::B64 => ".b64",
        }
    }
}

/// Writes one `.entry` whose signature comes from a catalogue kernel.
#[derive(Debug)]
pub struct EntryWriter {
    kernel: &'static Kernel,
    directives: Vec<String>,
    registers: Vec<String>,
    body: Vec<String>,
    error: Option<String>,
}

impl EntryWriter {
    pub fn new(kernel: &'static Kernel) -> Self {
        Self {
            kernel,
            directives: Vec::new(),
            registers: Vec::new(),
            body: Vec::new(),
            error: None,
        }
    }

    /// The entry name of the kernel being written (for error messages).
    pub fn entry(&self) -> &'static str {
        self.kernel.entry()
    }

    /// A performance-tuning or cluster directive placed between the signature and the body.
    pub fn directive(&mut self, text: &str) {
        self.directives.push(text.to_owned());
    }

    /// A comment line in the body.
    pub fn comment(&mut self, text: &str) {
        self.body.push(format!("\t// {text}"));
    }

    /// An empty line, to separate phases.
    pub fn blank(&mut self) {
        self.body.push(String::new());
    }

    /// One instruction (without the trailing `;`), optionally predicated (`@%p_x ...`).
    pub fn ins(&mut self, text: &str) {
        self.collect_registers(text);
        self.body.push(format!("\t{text};"));
    }

    /// A statement-level `.pragma "<text>"`.
    pub fn pragma(&mut self, text: &str) {
        self.body.push(format!("\t.pragma \"{text}\";"));
    }

    /// A label (`$L_<name>`).
    pub fn label(&mut self, name: &str) {
        self.body.push(format!("{}:", Self::label_name(name)));
    }

    /// `bra` to label `name`, under `predicate` (`"@%p_x "`, `"@!%p_x "`, or `""` for an
    /// unconditional branch).
    pub fn bra(&mut self, predicate: &str, name: &str) {
        let target = Self::label_name(name);
        self.ins(&format!("{predicate}bra {target}"));
    }

    /// The spelling of label `name` for use in `bra`.
    pub fn label_name(name: &str) -> String {
        format!("$L_{name}")
    }

    /// `ld.param` of the catalogue parameter `name` into `register`, checking that the
    /// catalogue declares the parameter with type `ty`.
    pub fn load_param(&mut self, register: &str, name: &str, ty: ParamType) {
        match self
            .kernel
            .params()
            .iter()
            .find(|param| param.name() == name)
        {
            Some(param) if param.ty() == ty => {
                self.ins(&format!("ld.param{} {register}, [param_{name}]", ty.ptx()));
            }
            Some(param) => self.fail(format!(
                "kernel `{}`: template loads parameter `{name}` as {} but the catalogue says {}",
                self.kernel.entry(),
                ty.ptx(),
                param.ty().ptx()
            )),
            None => self.fail(format!(
                "kernel `{}`: template loads parameter `{name}` which the catalogue does not list",
                self.kernel.entry()
            )),
        }
    }

    fn fail(&mut self, message: String) {
        if self.error.is_none() {
            self.error = Some(message);
        }
    }

    fn collect_registers(&mut self, text: &str) {
        let mut rest = text;
        while let Some(start) = rest.find('%') {
            let tail = &rest[start..];
            let len = 1 + tail[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len() - 1);
            let name = &tail[..len];
            if RegClass::of(name).is_some() {
                if !self.registers.iter().any(|known| known == name) {
                    self.registers.push(name.to_owned());
                }
            } else if !SPECIAL_REGISTERS.contains(&name) {
                self.fail(format!(
                    "kernel `{}`: `{name}` in `{text}` is neither a %r_/%rd_/%p_ register nor a known special register",
                    self.kernel.entry()
                ));
            }
            rest = &tail[len..];
        }
    }

    /// The finished entry, or the first template error.
    pub fn finish(self) -> Result<String, String> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let mut out = String::new();
        let params: Vec<String> = self
            .kernel
            .params()
            .iter()
            .map(|param| {
                format!(
                    "\t.param {}",
                    param.ty().declaration(&format!("param_{}", param.name()))
                )
            })
            .collect();
        // Writing into a String cannot fail.
        let _ = writeln!(out, ".visible .entry {}(", self.kernel.entry());
        let _ = writeln!(out, "{}", params.join(",\n"));
        let _ = writeln!(out, ")");
        for directive in &self.directives {
            let _ = writeln!(out, "{directive}");
        }
        let _ = writeln!(out, "{{");
        for class in [RegClass::Pred, RegClass::B32, RegClass::B64] {
            for register in self
                .registers
                .iter()
                .filter(|r| RegClass::of(r) == Some(class))
            {
                let _ = writeln!(out, "\t.reg {} {register};", class.ptx());
            }
        }
        let _ = writeln!(out);
        for line in &self.body {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "}}");
        Ok(out)
    }
}
