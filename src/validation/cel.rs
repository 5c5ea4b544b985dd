//! A syntax check of Common Expression Language text, as istiod checks a Telemetry access-log
//! `filter.expression` (cel-go's `Parse`: the grammar of the CEL spec, its literals and escapes,
//! and the standard macros' argument shapes). Nothing is evaluated or type-checked, as in istiod;
//! an expression that passes is one Envoy's CEL filter can parse, so no config Rudder accepts is
//! rejected for it. Nesting is bounded, so hostile input cannot exhaust the stack.

/// How deep expressions may nest (parentheses, lists, calls, unary operators): cel-go bounds its
/// parser's recursion too; real filters nest a few levels.
const MAX_DEPTH: usize = 100;

/// Words CEL reserves: not identifiers.
const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
    "in",
    "true",
    "false",
    "null",
];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Int,
    Uint,
    Float,
    Str,
    Bytes,
    True,
    False,
    Null,
    /// Operators and punctuation, as written.
    Op(&'static str),
}

/// Whether `text` is a CEL expression (as cel-go parses it); the error says where it is not.
pub fn check(text: &str) -> Result<(), String> {
    parse(text, true)
}

/// `check`, for an expression Envoy's CEL filters evaluate: Envoy builds them with
/// comprehensions turned off, so the macros that expand to one (`all`, `exists`, `exists_one`,
/// `map`, `filter`) make Envoy refuse the whole config.
pub fn check_for_envoy(text: &str) -> Result<(), String> {
    parse(text, false)
}

fn parse(text: &str, comprehensions: bool) -> Result<(), String> {
    let tokens = lex(text)?;
    let mut p = Parser {
        tokens,
        at: 0,
        depth: 0,
        comprehensions,
    };
    p.expr()?;
    if let Some(t) = p.peek() {
        return Err(format!("Syntax error: extraneous input {}", show(t)));
    }
    Ok(())
}

fn show(t: &Token) -> String {
    match t {
        Token::Ident(s) => format!("'{s}'"),
        Token::Op(s) => format!("'{s}'"),
        other => format!("{other:?}").to_lowercase(),
    }
}

const OPS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",",
    "(", ")", "[", "]", "{", "}",
];

fn lex(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        // String and bytes literals, with their raw and bytes prefixes.
        let mut j = i;
        let mut raw = false;
        let mut bytes = false;
        while j < chars.len() && j - i < 2 && matches!(chars[j], 'r' | 'R' | 'b' | 'B') {
            match chars[j] {
                'r' | 'R' if !raw => raw = true,
                'b' | 'B' if !bytes => bytes = true,
                _ => break,
            }
            j += 1;
        }
        if j < chars.len() && matches!(chars[j], '"' | '\'') {
            let end = string(&chars, j, raw)?;
            out.push(if bytes { Token::Bytes } else { Token::Str });
            i = end;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(match word.as_str() {
                "true" => Token::True,
                "false" => Token::False,
                "null" => Token::Null,
                "in" => Token::Op("in"),
                _ => Token::Ident(word),
            });
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let (token, end) = number(&chars, i)?;
            out.push(token);
            i = end;
            continue;
        }
        let op = OPS.iter().find(|op| {
            op.chars()
                .enumerate()
                .all(|(k, oc)| chars.get(i + k) == Some(&oc))
        });
        match op {
            Some(op) => {
                out.push(Token::Op(op));
                i += op.chars().count();
            }
            None => return Err(format!("Syntax error: token recognition error at: '{c}'")),
        }
    }
    Ok(out)
}

/// A string literal from its opening quote at `at`: the index just past it.
fn string(chars: &[char], at: usize, raw: bool) -> Result<usize, String> {
    let quote = chars[at];
    let triple = chars.get(at + 1) == Some(&quote) && chars.get(at + 2) == Some(&quote);
    let mut i = at + if triple { 3 } else { 1 };
    loop {
        let Some(&c) = chars.get(i) else {
            return Err("Syntax error: unterminated string literal".into());
        };
        if triple {
            if c == quote && chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote) {
                return Ok(i + 3);
            }
        } else if c == quote {
            return Ok(i + 1);
        } else if c == '\n' || c == '\r' {
            return Err("Syntax error: newline in string literal".into());
        }
        if c == '\\' && !raw {
            i += escape(chars, i)?;
        } else {
            i += 1;
        }
    }
}

/// The length of the escape sequence at `at` (its backslash included).
fn escape(chars: &[char], at: usize) -> Result<usize, String> {
    let hex = |n: usize| -> Result<usize, String> {
        let digits = chars.get(at + 2..at + 2 + n).unwrap_or_default();
        if digits.len() == n && digits.iter().all(char::is_ascii_hexdigit) {
            Ok(2 + n)
        } else {
            Err("Syntax error: invalid escape sequence".into())
        }
    };
    match chars.get(at + 1) {
        Some('\\' | '?' | '"' | '\'' | '`' | 'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v') => Ok(2),
        Some('x' | 'X') => hex(2),
        Some('u') => hex(4),
        Some('U') => hex(8),
        Some('0'..='3') => {
            let digits = chars.get(at + 2..at + 4).unwrap_or_default();
            if digits.len() == 2 && digits.iter().all(|d| ('0'..='7').contains(d)) {
                Ok(4)
            } else {
                Err("Syntax error: invalid escape sequence".into())
            }
        }
        _ => Err("Syntax error: invalid escape sequence".into()),
    }
}

/// A numeric literal at `at`: its token and the index past it.
fn number(chars: &[char], at: usize) -> Result<(Token, usize), String> {
    let mut i = at;
    let digits = |i: &mut usize, hex: bool| {
        let start = *i;
        while *i < chars.len()
            && (chars[*i].is_ascii_digit() || (hex && chars[*i].is_ascii_hexdigit()))
        {
            *i += 1;
        }
        *i - start
    };
    if chars[i] == '0' && matches!(chars.get(i + 1), Some('x' | 'X')) {
        i += 2;
        if digits(&mut i, true) == 0 {
            return Err("Syntax error: invalid hex literal".into());
        }
        if matches!(chars.get(i), Some('u' | 'U')) {
            return Ok((Token::Uint, i + 1));
        }
        return Ok((Token::Int, i));
    }
    let whole = digits(&mut i, false);
    let mut float = false;
    if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
        i += 1;
        digits(&mut i, false);
        float = true;
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut k = i + 1;
        if matches!(chars.get(k), Some('+' | '-')) {
            k += 1;
        }
        let mut e = k;
        if digits(&mut e, false) == 0 {
            return Err("Syntax error: invalid float literal".into());
        }
        i = e;
        float = true;
    }
    if float {
        return Ok((Token::Float, i));
    }
    if whole == 0 {
        return Err("Syntax error: invalid number".into());
    }
    let text: String = chars[at..i].iter().collect();
    if matches!(chars.get(i), Some('u' | 'U')) {
        text.parse::<u64>()
            .map_err(|_| format!("Syntax error: invalid uint literal {text}"))?;
        return Ok((Token::Uint, i + 1));
    }
    // One past i64::MAX is read too: it is `-9223372036854775808` once negated.
    text.parse::<u64>()
        .ok()
        .filter(|n| *n <= i64::MAX as u64 + 1)
        .ok_or_else(|| format!("Syntax error: invalid int literal {text}"))?;
    Ok((Token::Int, i))
}

/// What the macro checks need of a parsed expression.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Ident,
    Select,
    Other,
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
    /// Whether comprehension macros may be used (not in Envoy).
    comprehensions: bool,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &'static str) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &'static str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(match self.peek() {
                Some(t) => format!(
                    "Syntax error: mismatched input {} expecting '{op}'",
                    show(t)
                ),
                None => format!("Syntax error: mismatched input '<EOF>' expecting '{op}'"),
            })
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Parser) -> Result<T, String>) -> Result<T, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("expression recursion limit exceeded: {MAX_DEPTH}"));
        }
        let out = f(self);
        self.depth -= 1;
        out
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.nested(|p| {
            let cond = p.binary(0)?;
            if p.eat("?") {
                p.binary(0)?;
                p.expect(":")?;
                p.expr()?;
                return Ok(Expr::Other);
            }
            Ok(cond)
        })
    }

    /// Binary operators by precedence level: `||`, `&&`, relations, additive, multiplicative.
    fn binary(&mut self, level: usize) -> Result<Expr, String> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["<", "<=", ">", ">=", "==", "!=", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        while let Some(Token::Op(op)) = self.peek() {
            if !ops.contains(op) {
                break;
            }
            self.at += 1;
            self.binary(level + 1)?;
            left = Expr::Other;
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") || self.eat("-") {
            self.nested(|p| p.unary())?;
            return Ok(Expr::Other);
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut expr = self.primary()?;
        loop {
            if self.eat(".") {
                let name = self.selector()?;
                if self.eat("(") {
                    let args = self.args(")")?;
                    expr = receiver_macro(&name, &args, self.comprehensions)?;
                } else if self.eat("{") {
                    // A message construction: `google.protobuf.Duration{seconds: 10}`.
                    self.field_inits()?;
                    expr = Expr::Other;
                } else {
                    expr = Expr::Select;
                }
            } else if self.eat("[") {
                self.expr()?;
                self.expect("]")?;
                expr = Expr::Other;
            } else {
                return Ok(expr);
            }
        }
    }

    fn selector(&mut self) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Token::Ident(name)) => {
                self.at += 1;
                Ok(name)
            }
            Some(t) => Err(format!(
                "Syntax error: no viable alternative at input {}",
                show(&t)
            )),
            None => Err("Syntax error: no viable alternative at input '<EOF>'".into()),
        }
    }

    /// Comma-separated expressions up to `close` (a trailing comma allowed in lists).
    fn args(&mut self, close: &'static str) -> Result<Vec<Expr>, String> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            if self.eat(close) {
                return Ok(out);
            }
            self.expect(",")?;
            if close == "]" && self.eat(close) {
                return Ok(out);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let leading_dot = self.eat(".");
        let Some(token) = self.peek().cloned() else {
            return Err("Syntax error: mismatched input '<EOF>'".into());
        };
        self.at += 1;
        match token {
            Token::Ident(name) => {
                if RESERVED.contains(&name.as_str()) {
                    return Err(format!("Syntax error: reserved identifier: {name}"));
                }
                if self.eat("(") {
                    let args = self.args(")")?;
                    return global_macro(&name, &args);
                }
                // A message construction: `Type{field: value}`.
                if self.eat("{") {
                    self.field_inits()?;
                    return Ok(Expr::Other);
                }
                Ok(Expr::Ident)
            }
            _ if leading_dot => Err(format!(
                "Syntax error: no viable alternative at input '.{}'",
                show(&token).trim_matches('\'')
            )),
            Token::Int | Token::Uint | Token::Float | Token::Str | Token::Bytes => Ok(Expr::Other),
            Token::True | Token::False | Token::Null => Ok(Expr::Other),
            Token::Op("(") => {
                self.expr()?;
                self.expect(")")?;
                Ok(Expr::Other)
            }
            Token::Op("[") => {
                self.args("]")?;
                Ok(Expr::Other)
            }
            Token::Op("{") => {
                self.map_inits()?;
                Ok(Expr::Other)
            }
            other => Err(format!("Syntax error: mismatched input {}", show(&other))),
        }
    }

    fn field_inits(&mut self) -> Result<(), String> {
        if self.eat("}") {
            return Ok(());
        }
        loop {
            self.selector()?;
            self.expect(":")?;
            self.expr()?;
            if self.eat("}") {
                return Ok(());
            }
            self.expect(",")?;
            if self.eat("}") {
                return Ok(());
            }
        }
    }

    fn map_inits(&mut self) -> Result<(), String> {
        if self.eat("}") {
            return Ok(());
        }
        loop {
            self.expr()?;
            self.expect(":")?;
            self.expr()?;
            if self.eat("}") {
                return Ok(());
            }
            self.expect(",")?;
            if self.eat("}") {
                return Ok(());
            }
        }
    }
}

/// `has(x.y)`: the standard macro wants a field selection.
fn global_macro(name: &str, args: &[Expr]) -> Result<Expr, String> {
    if name == "has" && (args.len() != 1 || args[0] != Expr::Select) {
        return Err("invalid argument to has() macro".into());
    }
    Ok(Expr::Other)
}

/// `e.all(x, p)`, `exists`, `exists_one`, `map`, `filter`: the first argument is a variable name.
fn receiver_macro(name: &str, args: &[Expr], comprehensions: bool) -> Result<Expr, String> {
    let arity: &[usize] = match name {
        "all" | "exists" | "exists_one" | "filter" => &[2],
        "map" => &[2, 3],
        _ => return Ok(Expr::Other),
    };
    if !arity.contains(&args.len()) {
        // Not the macro: an ordinary member call (cel-go leaves it to the checker).
        return Ok(Expr::Other);
    }
    if args[0] != Expr::Ident {
        return Err("argument must be a simple name".into());
    }
    if !comprehensions {
        return Err(format!(
            "the {name}() macro is a comprehension, which Envoy's CEL filters do not support"
        ));
    }
    Ok(Expr::Other)
}

#[cfg(test)]
mod tests {
    use super::{check, check_for_envoy};

    /// Expressions Istio's documentation and Envoy's CEL filter examples use, and what cel-go's
    /// parser refuses.
    #[test]
    fn cel_syntax_as_cel_go_parses_it() {
        for ok in [
            "response.code >= 400",
            "response.code >= 500 || request.headers['x-debug'] == 'true'",
            "connection.mtls && request.url_path.startsWith('/api')",
            "!has(request.headers.authorization)",
            "request.headers[\"user-agent\"].contains(\"curl\")",
            "xds.cluster_name == 'outbound|80||a.b.svc.cluster.local' ? true : false",
            "[1, 2, 3,].exists(x, x > 2u) && {'a': 1.5e3, 'b': -2}.size() == 2",
            "r'raw\\d' != b'\\x00\\101' && '''multi\nline''' != \"\\u00e9\"",
            "int(response.code) in [200, 204] // trailing comment",
            "google.protobuf.Duration{seconds: 10}.getSeconds() > 0",
            "-9223372036854775808 < 0 && 0x1F == 31 && .1 < 1.0",
            "request.size > 0 && response.flags % 2 == 0",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "response.code >=",
            "response.code = 500",
            "(a",
            "a[1",
            "'unterminated",
            "'bad \\q escape'",
            "has(a)",
            "a.all(x.y, true)",
            "if == 1",
            "1 2",
            "a ? b",
            "9223372036854775809",
            "a.",
            "a @ b",
            "{1: 2",
        ] {
            assert!(check(bad).is_err(), "{bad:?} passed");
        }
        // Envoy builds its expressions without comprehensions.
        assert!(
            check_for_envoy("[1].exists(x, x > 0)")
                .unwrap_err()
                .contains("comprehension")
        );
        assert_eq!(check_for_envoy("[1].size() > 0 && has(a.b)"), Ok(()));
        let deep = "(".repeat(10_000) + "1" + &")".repeat(10_000);
        assert!(check(&deep).unwrap_err().contains("recursion limit"));
    }
}
