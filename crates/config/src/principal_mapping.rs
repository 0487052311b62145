//! `ssl.principal.mapping.rules`: how a client certificate's subject (its
//! RFC 2253 distinguished name) becomes a principal name, as Kafka's
//! `SslPrincipalMapper`. Rules are tried in order; the first whose pattern
//! matches the whole name gives the principal:
//!
//! - `RULE:pattern/replacement/` with an optional `L` or `U` after it
//!   (lower- or upper-case the result); `$1`... in the replacement are the
//!   pattern's groups;
//! - `DEFAULT`: the distinguished name itself.
//!
//! Rules are separated by commas (or new lines); a comma inside a pattern
//! stays part of it. A name no rule matches is refused.

use regex::Regex;

/// One rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Map {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// The parsed rules.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    // As configured: two mappers are equal when their rules are.
    source: String,
}

impl PartialEq for PrincipalMapper {
    fn eq(&self, other: &PrincipalMapper) -> bool {
        self.source == other.source
    }
}

impl Eq for PrincipalMapper {}

impl Default for PrincipalMapper {
    fn default() -> PrincipalMapper {
        PrincipalMapper {
            rules: vec![Rule::Default],
            source: "DEFAULT".into(),
        }
    }
}

/// Reads up to the next unescaped `/`; returns the text (escapes kept) and
/// the rest after the slash.
fn until_slash(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&s[..i], &s[i + 1..])),
            _ => {}
        }
    }
    None
}

/// A Java-style replacement (`$1`, `\$`) in the regex crate's syntax.
fn replacement(java: &str) -> String {
    let mut out = String::with_capacity(java.len() + 8);
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

impl PrincipalMapper {
    /// Parses the rules; the error says which part is wrong.
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let mut out = Vec::new();
        let mut rest = rules.trim_start();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("DEFAULT") {
                out.push(Rule::Default);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("RULE:") {
                let (pattern, r) = until_slash(r)
                    .ok_or_else(|| format!("rule {rest:?}: no / after the pattern"))?;
                let (repl, r) = until_slash(r)
                    .ok_or_else(|| format!("rule {rest:?}: no / after the replacement"))?;
                let (case, r) = match r.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &r[1..]),
                    _ => (None, r),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("rule pattern {pattern:?}: {e}"))?;
                out.push(Rule::Map {
                    pattern,
                    replacement: replacement(repl),
                    case,
                });
                rest = r;
            } else {
                return Err(format!(
                    "invalid rule {rest:?}: expected DEFAULT or RULE:pattern/replacement/[LU]"
                ));
            }
            rest = rest.trim_start();
            match rest.chars().next() {
                None => {}
                Some(',' | '\n') => rest = rest[1..].trim_start(),
                Some(_) => return Err(format!("unexpected {rest:?} after a rule")),
            }
        }
        if out.is_empty() {
            return Err("no rules: use DEFAULT for the distinguished name as it is".into());
        }
        Ok(PrincipalMapper {
            rules: out,
            source: rules.trim().to_string(),
        })
    }

    /// The principal name of distinguished name `dn`, or `None` when no rule
    /// applies.
    pub fn map(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|r| match r {
            Rule::Default => Some(dn.to_string()),
            Rule::Map {
                pattern,
                replacement,
                case,
            } => {
                let caps = pattern.captures(dn)?;
                let mut name = String::new();
                caps.expand(replacement, &mut name);
                Some(match case {
                    Some('L') => name.to_lowercase(),
                    Some('U') => name.to_uppercase(),
                    _ => name,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_documented_example() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.map("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("serviceuser")
        );
        assert_eq!(
            m.map("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("adminuser@admin")
        );
        // The third rule's class has no '-': the group stops before it.
        assert_eq!(m.map("CN=Client-1").as_deref(), Some("client"));
        assert_eq!(m.map("O=nobody").as_deref(), Some("O=nobody"), "DEFAULT");
    }

    #[test]
    fn no_matching_rule_is_none_and_bad_rules_are_refused() {
        let m = PrincipalMapper::parse("RULE:^CN=([a-z]+)$/$1/U").unwrap();
        assert_eq!(m.map("CN=alice").as_deref(), Some("ALICE"));
        assert_eq!(m.map("CN=alice,O=x"), None);
        assert!(PrincipalMapper::parse("RULE:^CN=(.*)$/$1").is_err());
        assert!(PrincipalMapper::parse("RULE:(/x/").is_err());
        assert!(PrincipalMapper::parse("NOPE").is_err());
        assert!(PrincipalMapper::parse("").is_err());
        assert_eq!(
            PrincipalMapper::default().map("CN=x").as_deref(),
            Some("CN=x")
        );
    }

    #[test]
    fn replacements_are_javas() {
        let m = PrincipalMapper::parse("RULE:^CN=(a)(b)$/$2$1x\\$/").unwrap();
        assert_eq!(m.map("CN=ab").as_deref(), Some("bax$"));
    }
}
