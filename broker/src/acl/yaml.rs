//! The restricted YAML reader `plain_acl.yml` needs: one document into a [`Node`] tree whose
//! scalars keep their text exactly as written.
//!
//! Invariants: no aliases, no nesting deeper than [`ACL_FILE_DEPTH_MAX_COUNT`], one document only,
//! so a small file cannot expand into a large tree or a deep recursion.

use raftmq_common::limits::ACL_FILE_DEPTH_MAX_COUNT;

use super::error::AclConfigError;

/// A YAML node as `plain_acl.yml` needs it: scalars keep their text exactly as written (YAML 1.2
/// would read `secretKey: 0123456` as the number 123456), and no aliases or deep nesting are
/// accepted, so a small file cannot expand into a large tree or a deep recursion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A scalar; `plain` when written without quotes (only those can be null).
    Scalar { text: String, plain: bool },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with text keys; a repeated key keeps its last value, as Java's loader does.
    Map(Vec<(String, Node)>),
}

impl Node {
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| !v.is_null()),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The text of a (non-null) scalar.
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            Node::Scalar { text, .. } if !self.is_null() => Some(text),
            _ => None,
        }
    }

    /// A list of texts (absent: empty).
    pub(crate) fn texts(node: Option<&Node>, what: &str) -> Result<Vec<String>, AclConfigError> {
        match node {
            None => Ok(Vec::new()),
            Some(Node::Seq(items)) => items
                .iter()
                .filter(|i| !i.is_null())
                .map(|i| {
                    i.text()
                        .map(str::to_owned)
                        .ok_or_else(|| AclConfigError(format!("{what}: every entry must be text")))
                })
                .collect(),
            Some(_) => Err(AclConfigError(format!("{what} must be a list"))),
        }
    }
}

/// A collection being built from parser events.
enum Open {
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>, Option<String>),
}

/// Parses one YAML document into a [`Node`] (`None`: an empty file).
pub(crate) fn parse_tree(text: &str) -> Result<Option<Node>, AclConfigError> {
    use yaml_rust2::Event;
    use yaml_rust2::parser::Parser;
    use yaml_rust2::scanner::TScalarStyle;

    fn place(open: &mut [Open], root: &mut Option<Node>, node: Node) -> Result<(), AclConfigError> {
        match open.last_mut() {
            None if root.is_some() => Err(AclConfigError("one YAML document only".into())),
            None => {
                *root = Some(node);
                Ok(())
            }
            Some(Open::Seq(items)) => {
                items.push(node);
                Ok(())
            }
            Some(Open::Map(entries, pending)) => match pending.take() {
                Some(key) => {
                    entries.push((key, node));
                    Ok(())
                }
                None => match node {
                    Node::Scalar { text, .. } => {
                        *pending = Some(text);
                        Ok(())
                    }
                    _ => Err(AclConfigError("mapping keys must be text".into())),
                },
            },
        }
    }

    let mut parser = Parser::new_from_str(text);
    let mut open: Vec<Open> = Vec::new();
    let mut root = None;
    loop {
        let (event, at) = parser.next_token().map_err(|e| AclConfigError(e.to_string()))?;
        let too_deep =
            || AclConfigError(format!("nested deeper than {ACL_FILE_DEPTH_MAX_COUNT} levels (line {})", at.line()));
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
            Event::Alias(_) => {
                return Err(AclConfigError(format!("YAML aliases are not accepted (line {})", at.line())));
            }
            Event::Scalar(text, style, _, _) => {
                place(&mut open, &mut root, Node::Scalar { text, plain: style == TScalarStyle::Plain })?
            }
            Event::SequenceStart(..) if open.len() >= ACL_FILE_DEPTH_MAX_COUNT => return Err(too_deep()),
            Event::MappingStart(..) if open.len() >= ACL_FILE_DEPTH_MAX_COUNT => return Err(too_deep()),
            Event::SequenceStart(..) => open.push(Open::Seq(Vec::new())),
            Event::MappingStart(..) => open.push(Open::Map(Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match open.pop() {
                    Some(Open::Seq(items)) => Node::Seq(items),
                    Some(Open::Map(entries, _)) => Node::Map(entries),
                    None => return Err(AclConfigError("unbalanced YAML".into())),
                };
                place(&mut open, &mut root, node)?;
            }
        }
    }
    Ok(root)
}
