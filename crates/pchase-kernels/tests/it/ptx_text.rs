//! A minimal PTX reader for the tests: module directives, entry signatures, and the body of
//! each entry as labels and instructions with their operands. It understands exactly the
//! subset of PTX the generator writes, and panics with a message on anything else so a test
//! cannot pass by misreading.

/// One parsed module.
#[derive(Debug)]
pub struct PtxModule {
    pub version: String,
    pub target: String,
    pub address_size: String,
    /// Module-scope declarations other than the three directives (e.g. `.const`, `.extern`).
    pub declarations: Vec<String>,
    pub entries: Vec<Entry>,
}

/// One `.entry`.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    /// `(type, name)` in order, e.g. `(".u64", "param_chain")`.
    pub params: Vec<(String, String)>,
    /// Directives between the signature and the body (`.reqnctapercluster 2, 1, 1`).
    pub directives: Vec<String>,
    pub body: Vec<Statement>,
}

/// A body statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Label(String),
    /// `.pragma "<text>"` (the text without quotes).
    Pragma(String),
    Instruction(Instruction),
}

/// One instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct Instruction {
    /// `%p_loop` or `!%p_loop` when predicated.
    pub predicate: Option<String>,
    pub opcode: String,
    pub operands: Vec<String>,
}

impl Instruction {
    /// Registers an operand mentions (`%name` tokens, special registers included).
    pub fn registers_in(operand: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = operand;
        while let Some(start) = rest.find('%') {
            let tail = &rest[start..];
            let len = 1 + tail[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len() - 1);
            out.push(tail[..len].to_owned());
            rest = &tail[len..];
        }
        out
    }

    /// Whether the instruction writes no register (stores, branches, barriers, ret).
    fn has_no_destination(&self) -> bool {
        ["st.", "bra", "bar.", "barrier.", "ret"]
            .iter()
            .any(|prefix| self.opcode.starts_with(prefix))
    }

    /// Registers written.
    pub fn defs(&self) -> Vec<String> {
        if self.has_no_destination() || self.operands.is_empty() {
            return Vec::new();
        }
        Self::registers_in(&self.operands[0])
    }

    /// Registers read (including the predicate and address registers of stores).
    pub fn uses(&self) -> Vec<String> {
        let mut used: Vec<String> = self
            .predicate
            .iter()
            .flat_map(|p| Self::registers_in(p))
            .collect();
        let skip = usize::from(!self.has_no_destination());
        for operand in self.operands.iter().skip(skip) {
            used.extend(Self::registers_in(operand));
        }
        used
    }

    /// Whether this is `mov.u32 <dst>, %clock`.
    pub fn is_clock32_read(&self) -> bool {
        self.opcode == "mov.u32" && self.operands.get(1).is_some_and(|o| o == "%clock")
    }

    /// Whether this is `mov.u64 <dst>, %clock64`.
    pub fn is_clock64_read(&self) -> bool {
        self.opcode == "mov.u64" && self.operands.get(1).is_some_and(|o| o == "%clock64")
    }

    /// Whether this reads memory other than kernel parameters.
    pub fn is_memory_load(&self) -> bool {
        (self.opcode.starts_with("ld.") && !self.opcode.starts_with("ld.param"))
            || self.opcode.starts_with("tex.")
    }

    /// The branch target of a `bra`.
    pub fn branch_target(&self) -> Option<&str> {
        (self.opcode == "bra").then(|| self.operands[0].as_str())
    }
}

impl Entry {
    /// The instructions of the body, labels left out.
    pub fn instructions(&self) -> impl Iterator<Item = &Instruction> {
        self.body.iter().filter_map(|s| match s {
            Statement::Instruction(i) => Some(i),
            Statement::Label(_) | Statement::Pragma(_) => None,
        })
    }

    /// Labels of loops whose header carries `.pragma "nounroll"` as its first statement.
    pub fn nounroll_loop_labels(&self) -> Vec<String> {
        self.body
            .windows(2)
            .filter_map(|pair| match pair {
                [Statement::Label(label), Statement::Pragma(p)] if p == "nounroll" => {
                    Some(label.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Every loop: the instructions between a label and a later branch back to it.
    pub fn loops(&self) -> Vec<Vec<Instruction>> {
        let mut loops = Vec::new();
        for (start, statement) in self.body.iter().enumerate() {
            let Statement::Label(label) = statement else {
                continue;
            };
            let back_edge = self.body.iter().enumerate().skip(start + 1).find(|(_, s)| {
                matches!(s, Statement::Instruction(i) if i.branch_target() == Some(label.as_str()))
            });
            if let Some((end, _)) = back_edge {
                loops.push(
                    self.body[start + 1..=end]
                        .iter()
                        .filter_map(|s| match s {
                            Statement::Instruction(i) => Some(i.clone()),
                            Statement::Label(_) | Statement::Pragma(_) => None,
                        })
                        .collect(),
                );
            }
        }
        loops
    }
}

fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn split_top_level(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            parts.push(current.trim().to_owned());
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        parts.push(current.trim().to_owned());
    }
    parts
}

fn parse_instruction(text: &str) -> Instruction {
    let mut rest = text.trim();
    let mut predicate = None;
    if let Some(stripped) = rest.strip_prefix('@') {
        let (pred, tail) = stripped
            .split_once(char::is_whitespace)
            .unwrap_or_else(|| panic!("predicate without instruction: `{text}`"));
        predicate = Some(pred.to_owned());
        rest = tail.trim();
    }
    let (opcode, operands) = match rest.split_once(char::is_whitespace) {
        Some((opcode, operands)) => (opcode, split_top_level(operands)),
        None => (rest, Vec::new()),
    };
    Instruction {
        predicate,
        opcode: opcode.to_owned(),
        operands,
    }
}

fn parse_body(text: &str) -> Vec<Statement> {
    let mut statements = Vec::new();
    for chunk in text.split(';') {
        let mut rest = chunk.trim();
        // Labels end their first token with ':' (`ld.shared::cluster` never does).
        loop {
            let first = rest.split_whitespace().next().unwrap_or_default();
            if first.len() > 1 && first.ends_with(':') && !first.ends_with("::") {
                statements.push(Statement::Label(first.trim_end_matches(':').to_owned()));
                rest = rest[first.len()..].trim();
            } else {
                break;
            }
        }
        if rest.is_empty() || rest.starts_with(".reg") {
            continue;
        }
        if let Some(pragma) = rest.strip_prefix(".pragma") {
            statements.push(Statement::Pragma(
                pragma.trim().trim_matches('"').to_owned(),
            ));
            continue;
        }
        statements.push(Statement::Instruction(parse_instruction(rest)));
    }
    statements
}

/// Parses a module the generator wrote.
pub fn parse_module(text: &str) -> PtxModule {
    let text = strip_comments(text);
    let mut version = None;
    let mut target = None;
    let mut address_size = None;
    let mut declarations = Vec::new();
    let mut entries = Vec::new();
    let mut rest = text.as_str();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        if rest.starts_with(".visible .entry") || rest.starts_with(".entry") {
            let open = rest.find('(').expect("entry without parameter list");
            let name = rest[..open]
                .split_whitespace()
                .last()
                .expect("entry name")
                .to_owned();
            let close = open + rest[open..].find(')').expect("unclosed parameter list");
            let params = split_top_level(&rest[open + 1..close])
                .into_iter()
                .map(|p| {
                    let words: Vec<&str> = p.split_whitespace().collect();
                    assert_eq!(words[0], ".param", "parameter `{p}` of {name}");
                    match words.len() {
                        3 => (words[1].to_owned(), words[2].to_owned()),
                        // `.param .align 64 .b8 param_tmap[128]`: the type with its
                        // alignment, the name without the array size.
                        5 => (
                            words[1..4].join(" "),
                            words[4].split('[').next().unwrap_or_default().to_owned(),
                        ),
                        _ => panic!("parameter `{p}` of {name}"),
                    }
                })
                .collect();
            let brace = close + rest[close..].find('{').expect("entry without body");
            let directives = rest[close + 1..brace]
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            let mut depth = 0;
            let mut end = None;
            for (offset, c) in rest[brace..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(brace + offset);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let end = end.expect("unbalanced braces");
            entries.push(Entry {
                name,
                params,
                directives,
                body: parse_body(&rest[brace + 1..end]),
            });
            rest = &rest[end + 1..];
        } else {
            let line_end = rest.find('\n').unwrap_or(rest.len());
            let line = rest[..line_end].trim();
            if let Some(v) = line.strip_prefix(".version ") {
                version = Some(v.trim().to_owned());
            } else if let Some(t) = line.strip_prefix(".target ") {
                target = Some(t.trim().to_owned());
            } else if let Some(a) = line.strip_prefix(".address_size ") {
                address_size = Some(a.trim().to_owned());
            } else {
                declarations.push(line.to_owned());
            }
            rest = &rest[line_end..];
        }
    }
    PtxModule {
        version: version.expect("module without .version"),
        target: target.expect("module without .target"),
        address_size: address_size.expect("module without .address_size"),
        declarations,
        entries,
    }
}

impl PtxModule {
    /// The entry called `name`.
    pub fn entry(&self, name: &str) -> &Entry {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no `.entry {name}(` in the module"))
    }
}

#[test]
fn reader_understands_labels_predicates_vectors_and_cluster_spaces() {
    let module = parse_module(
        ".version 7.8\n.target sm_90\n.address_size 64\n\
         .visible .entry k(\n\t.param .u64 param_a,\n\t.param .u32 param_b\n)\n.reqnctapercluster 2, 1, 1\n{\n\
         \t.reg .b32 %r_j;\n$L_top: // comment; with semicolon\n\t.pragma \"nounroll\";\n\
         \ttex.1d.v4.u32.s32 {%r_j, %r_y, %r_z, %r_w}, [%rd_t, {%r_c}];\n\
         \tld.shared::cluster.u32 %r_j, [%r_a];\n\t@!%p_x bra $L_top;\n\tret;\n}\n",
    );
    let entry = module.entry("k");
    assert_eq!(
        entry.params,
        [
            (".u64".into(), "param_a".into()),
            (".u32".into(), "param_b".into())
        ]
    );
    assert_eq!(entry.directives, [".reqnctapercluster 2, 1, 1"]);
    assert_eq!(entry.body[0], Statement::Label("$L_top".into()));
    assert_eq!(entry.body[1], Statement::Pragma("nounroll".into()));
    assert_eq!(entry.nounroll_loop_labels(), ["$L_top"]);
    let instructions: Vec<_> = entry.instructions().collect();
    assert_eq!(instructions[0].defs(), ["%r_j", "%r_y", "%r_z", "%r_w"]);
    assert_eq!(instructions[0].uses(), ["%rd_t", "%r_c"]);
    assert_eq!(instructions[1].opcode, "ld.shared::cluster.u32");
    assert_eq!(instructions[2].predicate.as_deref(), Some("!%p_x"));
    assert_eq!(entry.loops().len(), 1);
    assert_eq!(entry.loops()[0].len(), 3);
}
