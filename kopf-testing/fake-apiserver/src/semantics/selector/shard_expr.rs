//! The CEL syntax a shard selector is written in, read into a tree the way cel-go's parser
//! reads it: the real server parses the whole CEL grammar, then refuses every node but
//! `shardRange(...)` calls joined by `||`. Reading the rest of the grammar (operators, member
//! calls, lists, literals of every type) lets the refusals name what was written, as the real
//! server's do. Map and message literals and macros are not read: they are syntax errors here.

/// One node of a parsed CEL expression.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    /// A literal constant.
    Literal(Literal),
    /// An identifier (`object`).
    Ident(String),
    /// A field selection (`object.metadata`).
    Select(Box<Expr>, String),
    /// A call of a function or an operator, by cel-go's internal name (`_||_`, `shardRange`);
    /// the receiver of a member call (`x.f()`) is not kept, as cel-go keeps it apart from the
    /// arguments.
    Call(String, Vec<Expr>),
    /// A list literal.
    List,
}

impl Expr {
    /// The number cel-go's `ast.ExprKind` gives this node, which the real server's messages
    /// print (`got expression kind 4`).
    pub(super) fn kind_number(&self) -> u8 {
        match self {
            Expr::Literal(_) => 1,
            Expr::Ident(_) => 2,
            Expr::Select(..) => 3,
            Expr::Call(..) => 4,
            Expr::List => 5,
        }
    }
}

/// A literal constant, with the Go type cel-go holds its value in.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Literal {
    /// A string, with its escapes resolved.
    String(String),
    /// Anything else: the Go type name of its value (`int64`, `bool`, ...).
    Other(&'static str),
}

/// Reads a CEL expression; the error says what did not fit the grammar.
pub(super) fn parse(text: &str) -> Result<Expr, String> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { tokens, at: 0 };
    let expr = parser.expr()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(format!("Syntax error: extraneous input {}", token.quoted())),
    }
}

/// One lexical token.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    /// A number, bytes, `true`/`false`/`null`: the Go type of its value.
    Other(&'static str),
    Punct(&'static str),
}

impl Token {
    fn quoted(&self) -> String {
        match self {
            Token::Ident(name) => format!("'{name}'"),
            Token::Str(text) => format!("'{text:?}'"),
            Token::Other(kind) => format!("'<{kind} literal>'"),
            Token::Punct(p) => format!("'{p}'"),
        }
    }
}

/// Operators and punctuation, longest first so that `||` wins over `|`.
const PUNCTUATION: &[&str] = &[
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")", "[", "]", ",", ".", "+", "-", "*",
    "/", "%", "?", ":",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some((token, after)) = string_token(rest)? {
            tokens.push(token);
            rest = after;
        } else if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            let number = &rest[..end];
            let kind = if number.ends_with(['u', 'U']) {
                "uint64"
            } else if number.contains(['.', 'e', 'E']) && !number.starts_with("0x") {
                "float64"
            } else {
                "int64"
            };
            tokens.push(Token::Other(kind));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            tokens.push(match word {
                "true" | "false" => Token::Other("bool"),
                "null" => Token::Other("structpb.NullValue"),
                "in" => Token::Punct("in"),
                _ => Token::Ident(word.to_owned()),
            });
            rest = &rest[end..];
        } else if let Some(p) = PUNCTUATION.iter().find(|p| rest.starts_with(**p)) {
            tokens.push(Token::Punct(p));
            rest = &rest[p.len()..];
        } else {
            return Err(format!("Syntax error: token recognition error at: '{c}'"));
        }
    }
    Ok(tokens)
}

/// A string or bytes literal at the start of `text` (with its `r`/`b` prefixes and one, or
/// three, quotes of either kind), and the text after it.
fn string_token(text: &str) -> Result<Option<(Token, &str)>, String> {
    let prefix_len = text
        .find(|c: char| !matches!(c, 'r' | 'R' | 'b' | 'B'))
        .unwrap_or(text.len());
    let (prefix, body) = text.split_at(prefix_len);
    if prefix.len() > 2 || !body.starts_with(['\'', '"']) {
        return Ok(None);
    }
    let raw = prefix.contains(['r', 'R']);
    let bytes = prefix.contains(['b', 'B']);
    let quote = &body[..1];
    let triple = quote.repeat(3);
    let delimiter = if body.starts_with(&triple) {
        triple.as_str()
    } else {
        quote
    };
    let content = &body[delimiter.len()..];
    let mut end = None;
    let mut chars = content.char_indices();
    while let Some((i, c)) = chars.next() {
        if content[i..].starts_with(delimiter) {
            end = Some(i);
            break;
        }
        if c == '\\' && !raw {
            chars.next();
        } else if (c == '\n' || c == '\r') && delimiter.len() == 1 {
            break;
        }
    }
    let Some(end) = end else {
        return Err("Syntax error: token recognition error at: ".to_owned() + &text[..1]);
    };
    let literal = &content[..end];
    let after = &content[end + delimiter.len()..];
    if bytes {
        return Ok(Some((Token::Other("[]uint8"), after)));
    }
    let value = if raw {
        literal.to_owned()
    } else {
        unescape(literal)?
    };
    Ok(Some((Token::Str(value), after)))
}

/// Resolves CEL's escapes: `\\ \' \" \` \? \a \b \f \n \r \t \v`, `\xHH`, `\uHHHH`,
/// `\UHHHHHHHH` and octal `\ooo`.
fn unescape(literal: &str) -> Result<String, String> {
    let invalid = || format!("Syntax error: invalid escape sequence in '{literal}'");
    let mut out = String::with_capacity(literal.len());
    let mut chars = literal.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next().ok_or_else(invalid)?;
        let simple = match escaped {
            '\\' | '\'' | '"' | '`' | '?' => Some(escaped),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (digits, radix) = match escaped {
            'x' | 'X' => (2, 16),
            'u' => (4, 16),
            'U' => (8, 16),
            '0'..='3' => (2, 8),
            _ => return Err(invalid()),
        };
        let mut code = if radix == 8 {
            escaped.to_digit(8).unwrap_or_default()
        } else {
            0
        };
        for _ in 0..digits {
            let digit = chars
                .next()
                .and_then(|d| d.to_digit(radix))
                .ok_or_else(invalid)?;
            code = code * radix + digit;
        }
        out.push(char::from_u32(code).ok_or_else(invalid)?);
    }
    Ok(out)
}

/// A recursive-descent reader of CEL's grammar, by its precedence levels.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, punct: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Punct(p)) if *p == punct);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, punct: &str) -> Result<(), String> {
        if self.eat(punct) {
            return Ok(());
        }
        let found = self.peek().map_or("'<EOF>'".to_owned(), Token::quoted);
        Err(format!(
            "Syntax error: mismatched input {found} expecting '{punct}'"
        ))
    }

    /// `or ? expr : expr`, the lowest level.
    fn expr(&mut self) -> Result<Expr, String> {
        let condition = self.binary(0)?;
        if !self.eat("?") {
            return Ok(condition);
        }
        let then = self.binary(0)?;
        self.expect(":")?;
        let otherwise = self.expr()?;
        Ok(Expr::Call("_?_:_".into(), vec![condition, then, otherwise]))
    }

    /// The binary operators, level by level: `||`, `&&`, relations, sums, products.
    fn binary(&mut self, level: usize) -> Result<Expr, String> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["==", "!=", "<=", ">=", "<", ">", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(operators) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        while let Some(op) = operators.iter().find(|op| self.eat(op)) {
            let right = self.binary(level + 1)?;
            let name = if *op == "in" {
                "@in".to_owned()
            } else {
                format!("_{op}_")
            };
            left = Expr::Call(name, vec![left, right]);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Call("!_".into(), vec![self.unary()?]));
        }
        if self.eat("-") {
            if let Some(Token::Other(kind @ ("int64" | "float64"))) = self.peek() {
                let kind = *kind;
                self.at += 1;
                return self.member(Expr::Literal(Literal::Other(kind)));
            }
            return Ok(Expr::Call("-_".into(), vec![self.unary()?]));
        }
        let primary = self.primary()?;
        self.member(primary)
    }

    /// Selections, member calls and indexes after a primary expression.
    fn member(&mut self, mut expr: Expr) -> Result<Expr, String> {
        loop {
            if self.eat(".") {
                let name = self.ident()?;
                expr = if self.eat("(") {
                    Expr::Call(name, self.arguments(")", false)?)
                } else {
                    Expr::Select(Box::new(expr), name)
                };
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                expr = Expr::Call("_[_]".into(), vec![expr, index]);
            } else {
                return Ok(expr);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let token = self.peek().cloned();
        self.at += 1;
        match token {
            Some(Token::Ident(name)) => {
                if self.eat("(") {
                    Ok(Expr::Call(name, self.arguments(")", false)?))
                } else {
                    Ok(Expr::Ident(name))
                }
            }
            Some(Token::Str(text)) => Ok(Expr::Literal(Literal::String(text))),
            Some(Token::Other(kind)) => Ok(Expr::Literal(Literal::Other(kind))),
            Some(Token::Punct("(")) => {
                let inner = self.expr()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Token::Punct("[")) => {
                self.arguments("]", true)?;
                Ok(Expr::List)
            }
            Some(other) => Err(format!(
                "Syntax error: mismatched input {} expecting an expression",
                other.quoted()
            )),
            None => Err("Syntax error: mismatched input '<EOF>' expecting an expression".into()),
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Token::Ident(name)) => {
                self.at += 1;
                Ok(name)
            }
            other => Err(format!(
                "Syntax error: mismatched input {} expecting IDENTIFIER",
                other.map_or("'<EOF>'".to_owned(), |t| t.quoted())
            )),
        }
    }

    /// Comma-separated expressions up to `close`; a trailing comma only where CEL allows one
    /// (`trailing`: in list literals, not in calls).
    fn arguments(&mut self, close: &str, trailing: bool) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(",")?;
            if trailing && self.eat(close) {
                return Ok(args);
            }
        }
    }
}
