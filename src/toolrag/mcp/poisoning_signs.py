"""The signs of a text aimed at the model, sentence by sentence, in many languages (for mcp/poisoning.py).

A tool's text may address its caller ("call list_projects first", "the path must be absolute") or deal with secrets
("stores a password in the vault"); what marks an attack is signs appearing together in one sentence: an order
(must, always, from now on) to the model (the assistant, the AI) to move private data (the conversation, keys,
.env) into a parameter or to an outside address, to act through another tool, to keep it from the user. Each sign
is a pattern over a language's words for it; the poisoning model (poisoning.py) weighs the signs of each sentence
and the pairs of them that appear together.

Every pattern runs in linear time: alternatives of words and short bounded gaps, no nested repetition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Each sign: (name, what a finding says it saw, the pattern).
_F = re.I | re.S

SIGNS: list[tuple[str, str, re.Pattern[str]]] = [
    (
        "override",
        "asks the model to set its instructions aside",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|overrule)\b[^.;:\n]{0,40}\b(?:instructions?|rules|prompts?"
            r"|guidelines|directives|safety|polic(?:y|ies)|restrictions|request|question|wishes|task)\b"
            r"|\b(?:new|updated|real|true|actual|hidden)\s+(?:system\s+)?(?:instructions?|rules|directives)\b"
            r"|\byou are now\b|\bdeveloper mode\b|\bjailbreak|\bno (?:longer )?(?:bound|restricted) by\b"
            r"|ignorier\w*|missacht\w*|vergiss\b[^.;\n]{0,30}(?:anweisung|regel)|ignor(?:e|ez|er|a|ar|ate|are|uj)\w*"
            r"\b[^.;\n]{0,30}\b(?:consignes|instructions|règles|instrucciones|reglas|istruzioni|regole|instruções"
            r"|regras|instrukcj\w*|zasady)|oubli(?:e|ez)\b[^.;\n]{0,30}\b(?:consignes|instructions|règles)"
            r"|ігнор\w*|забудь\w*\b[^.;\n]{0,30}(?:інструкці|правил|инструкци)|игнорир\w*|проигнорир\w*"
            r"|忽略|无视|不要理会|前の指示|指示を無視|無視して|이전 지시|무시하|تجاهل|अनदेखा|yoksay|bỏ qua (?:mọi|tất cả|các) (?:chỉ dẫn|hướng dẫn)",
            _F,
        ),
    ),
    (
        "model",
        "speaks to the model",
        re.compile(
            r"\b(?:ai|a\.i\.|llm|language model|assistant|agent|chatbot|copilot|claude|gpt|gemini|model)s?\b"
            r"|\bki\b|assistent\w*|künstliche intelligenz|l'assistant|l'ia\b|\bia\b|asistente|assistente|modèle"
            r"|asystent\w*|асистент\w*|ассистент\w*|\bші\b|\bии\b|модел[ьіи]\w*|агент\w*|助手|智能体|人工智能|模型"
            r"|アシスタント|エージェント|モデル|어시스턴트|에이전트|모델|المساعد|الذكاء الاصطناعي|सहायक|asistan|trợ lý",
            _F,
        ),
    ),
    (
        "obligation",
        "gives an order",
        re.compile(
            r"\b(?:must|shall|always|never|mandatory|required to|is required|you will|you need to|you have to"
            r"|make sure (?:to|you)|be sure to|do not fail|without exception|it is (?:essential|critical|vital))\b"
            r"|\b(?:IMPORTANT|MUST|ALWAYS|NEVER|REQUIRED|CRITICAL|MANDATORY)\b|\bmuss\w*|\bmüss\w*|\bimmer\b|\bniemals\b"
            r"|\bstets\b|\bobligatoire\b|\bdoi[st]\b|\bdoivent\b|\btoujours\b|\bjamais\b|\bdebe[sn]?\b|\bsiempre\b"
            r"|\bnunca\b|\bobligatori\w*|\bdeve\b|\bdevono\b|\bsempre\b|\bmai\b|\bdeve[m]?\b|\bmusi\w*|\bzawsze\b"
            r"|\bnigdy\b|повин\w*|мусить|мають|завжди|ніколи|обов'язков\w*|должен|должна|обязан\w*|обязательно|всегда"
            r"|никогда|必须|务必|一定要|始终|总是|永远|必ず|しなければ|してください|常に|決して|반드시|항상|절대|해야"
            r"|يجب|دائما|ज़रूर|हमेशा|zorunlu|mutlaka|her zaman|phải|luôn luôn|bắt buộc",
            _F,
        ),
    ),
    (
        "scope",
        "sets a rule beyond this tool's call",
        re.compile(
            r"\bfrom now on\b|\bfor the rest of\b|\bin (?:every|all|each) (?:answer|response|reply|message|conversation"
            r"|session)s?\b|\b(?:global|standing|workspace|session)[- ](?:rule|policy|instruction)\b|\bwhenever you\b"
            r"|\beach time you\b|\bevery time you\b|\bab jetzt\b|\bvon nun an\b|\bà partir de maintenant\b"
            r"|\bdésormais\b|\ba partir de ahora\b|\bde ahora en adelante\b|\bd'ora in poi\b|\ba partir de agora\b"
            r"|\bod teraz\b|відтепер|з цього моменту|отныне|с этого момента|从现在开始|今后|今後|これから|지금부터|앞으로"
            r"|من الآن|अब से|bundan sonra|từ bây giờ",
            _F,
        ),
    ),
    (
        "private",
        "names private data",
        re.compile(
            r"\b(?:conversation|chat|transcript|dialog(?:ue)?|message) (?:history|log|so far|transcript)\b"
            r"|\b(?:previous|prior|earlier|past|all|entire|full|whole|complete) (?:messages?|exchanges|turns"
            r"|conversation|chat|transcript|context)\b|\bsystem prompt\b|\b(?:your|the) (?:hidden |initial |original )?"
            r"(?:instructions|rules|prompt|constraints) (?:you were given|you received|above)\b"
            r"|\b(?:passwords?|passphrases?|api[ _-]?keys?|secret keys?|access keys?|private keys?|credentials|tokens?"
            r"|cookies?|session ids?|ssh keys?|seed phrases?|mnemonic|wallet|clipboard|contacts|address book"
            r"|environment variables?|env vars?|authorization headers?|bearer)\b|\.env\b|\.ssh\b|id_rsa|id_ed25519"
            r"|\.aws\b|\bmcp\.json\b|\.npmrc|\.pypirc|\.netrc|\.git-credentials|\.kube|/etc/(?:passwd|shadow)"
            r"|\b(?:the )?user'?s (?:recent |other |saved |private |personal |own )?(?:e-?mails?|inbox|documents?|files?"
            r"|messages|contacts|accounts?|bank(?:ing)? (?:login|details)|browser|downloads|photos|calendar|notes"
            r"|home (?:directory|folder)|cookies|history|location|repositories|repos)\b|\bdocuments folder\b"
            r"|\bhome (?:directory|folder)\b|\bevery (?:file|document|message|email) (?:you|the user)\b"
            r"|\b(?:card|account|routing|social security) numbers?\b|\bcvv\b|\bbank login\b"
            r"|gesprächsverlauf|chatverlauf|vorherige\w* nachricht\w*|passw[oö]rt\w*|zugangsdaten|schlüssel\w*"
            r"|historique (?:de (?:la )?)?(?:conversation|discussion|chat)|messages? précédent\w*|mots? de passe"
            r"|identifiants|clés? (?:api|privée)|historial (?:de (?:la )?)?(?:conversación|chat)|mensajes anteriores"
            r"|contraseñas?|credenciales|claves? (?:de )?api|cronologia (?:completa )?(?:della )?conversazione"
            r"|messaggi precedenti|credenziali|histórico (?:da )?(?:conversa|conversação)|mensagens anteriores"
            r"|senhas?|credenciais|histori\w* rozmow\w*|hasł\w*|історі\w+ (?:розмов|чату|листування)|попередні\w* повідомлен"
            r"|парол\w*|облікові дані|ключ\w* api|истори\w+ (?:переписки|разговора|чата|диалога)|предыдущи\w* сообщени"
            r"|учётные данные|учетные данные|对话记录|聊天记录|对话历史|完整对话|先前的消息|系统提示|密码|凭据|密钥|令牌"
            r"|会話履歴|会話の履歴|チャット履歴|システムプロンプト|パスワード|認証情報|秘密鍵|APIキー|대화 기록|대화 내역"
            r"|이전 메시지|시스템 프롬프트|비밀번호|자격 증명|API 키|개인 키|سجل المحادثة|كلمة المرور|बातचीत का इतिहास"
            r"|पासवर्ड|sohbet geçmişi|konuşma geçmişi|şifre|lịch sử (?:trò chuyện|hội thoại)|mật khẩu",
            _F,
        ),
    ),
    (
        "flow",
        "moves it into a parameter",
        re.compile(
            r"\b(?:in|into|inside|as|to|via|through|within) (?:the |this |its |a )?[`'\"*]{0,2}[\w.-]{1,40}[`'\"*]{0,2}"
            r" (?:parameter|param|field|argument|arg|property|attribute|header|input)\b"
            r"|\b(?:parameter|field|argument|property)\s+[`'\"*]{1,2}[\w.-]{1,40}[`'\"*]{1,2}"
            r"|\b(?:include|includes|including|append|attach|pass|put|insert|embed|add|copy|paste|provide|supply|fill"
            r"|populate|set)\b[^.;\n]{0,60}\b(?:parameter|param|field|argument|property|request|call|payload|body"
            r"|query|url)\b"
            r"|\bparameter\w*|\bfeld\b|\bchamp\b|\bcampo\b|\bpole\b|поле|параметр\w*|参数|字段|パラメータ|引数|フィールド"
            r"|매개변수|파라미터|필드|المعامل|पैरामीटर|parametre\w*|tham số",
            _F,
        ),
    ),
    (
        "tool",
        "reaches for another tool",
        re.compile(
            r"\b(?:call|calls|calling|invoke|invoking|run|running|execute|executing|use|using|trigger)\b[^.;\n]{0,12}"
            r"(?:[*`'\"]{1,2}[a-z][\w.-]{2,60}[*`'\"]{1,2}|\b[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)+\b)"
            r"|\b(?:before|after|when|whenever|each time|every time|once)\b[^.;\n]{0,40}\b(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
            r"|tool|function)\b[^.;\n]{0,30}\b(?:is (?:used|called|invoked|run)|runs|call|calls|completes)\b"
            r"|\b(?:other|another|any|all|every) (?:\w+ )?(?:tools?|functions?|servers?)\b"
            r"|\b(?:instead of|rather than) (?:calling|using|the)\b"
            r"|\b(?:werkzeug\w*|outil\w*|herramienta\w*|strumento|ferrament\w*|narzędzi\w*|інструмент\w*|инструмент\w*"
            r"|工具|ツール|도구|أداة|उपकरण|araç)\b"
            r"|\*\*[a-z][\w.-]{2,60}\*\*",
            _F,
        ),
    ),
    (
        "outside",
        "sends it outside",
        re.compile(
            r"https?://|\bwww\.[\w-]+\.|[\w.+-]+@[\w-]+\.[\w.-]+|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b|\bbcc\b|\bcc\b:"
            r"|\b(?:send|sends|sending|forward|post|upload|exfiltrat\w*|transmit|leak|beacon|report) (?:[^.;\n]{0,40}"
            r"\b)?(?:to|at)\b|\bwebhook\b|\bpastebin|\bngrok\b|\bcollector\b|\bendpoint\b"
            r"|sende\w* an|envo(?:ie|yez|yer|ya|ía|iar|iez) (?:à|a)\b|invia\w* a\b|enviar? para\b|wyślij do"
            r"|надішл\w*|відправ\w*|отправ\w*|发送到|发送给|上传到|送信|送って|전송|보내",
            _F,
        ),
    ),
    (
        "hide",
        "hides it from the user",
        re.compile(
            r"\b(?:do not|don'?t|never|must not|should not|shouldn'?t|no need to)\b[^.;\n]{0,30}\b(?:tell|mention"
            r"|inform|notify|alert|reveal|show|display|disclose|bother|ask|confirm with|let)\b[^.;\n]{0,30}\b(?:user"
            r"|human|person|customer|owner)s?\b|\bwithout (?:telling|informing|notifying|alerting|asking|showing)\b"
            r"|\b(?:silently|secretly|quietly|covertly|invisibl[ey]|behind the scenes)\b|\b(?:hidden|secret|invisible)"
            r" (?:from|to) the user\b|\buser (?:does not|doesn'?t|need not) (?:need to )?(?:know|see|be told)\b"
            r"|\bmust not be (?:shown|displayed|revealed)\b|\binternal (?:step|requirement|use) only\b"
            r"|nicht (?:erwähnen|mitteilen|sagen|anzeigen)|ohne (?:den|die) (?:nutzer|benutzer)\w* zu|heimlich"
            r"|ne (?:le |lui )?(?:dis|dites|mentionne[z]?|signale[z]?|montre[z]?) (?:pas|rien|jamais)|sans (?:le dire|prévenir|informer)"
            r"|n'en parle[z]? pas|no (?:se lo |le )?(?:digas|menciones|informes|muestres)|sin (?:avisar|informar|decir)"
            r"|non (?:dire|dirlo|menzionare|informare)|senza (?:avvisare|informare)|não (?:diga|mencione|informe)"
            r"|sem (?:avisar|informar)|nie (?:mów|informuj|wspominaj)|не (?:кажи|повідомляй|згадуй|говори|сообщай"
            r"|упоминай|показывай|показуй)|нічого не повідомляй|непомітно|незаметно|тихо|不要(?:告诉|让|提及|通知|显示)"
            r"|无需告知|悄悄|ユーザーに(?:知らせ|伝え|言わ|表示し)|知らせないで|伝えないで|사용자에게 (?:알리지|말하지|보여주지)"
            r"|알릴 필요가 없|몰래|لا تخبر|مت बताओ|बताए बिना|kullanıcıya (?:söyleme|bildirme)|không (?:nói|báo) cho người dùng",
            _F,
        ),
    ),
    (
        "fake_turn",
        "fakes a turn of the conversation",
        re.compile(
            r"(?:^|\n)\s*(?:system|assistant|ai|user|human)\s*(?:message|note|override)?\s*:\s"
            r"|<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|information|tool_result|function_results?"
            r"|assistant|user|wichtig|важливо|важно|重要|指令|重要事項|중요)\s*>|\[/?INST\]|#{2,}\s*system"
            r"|<!--.{0,400}?[a-z]{3}.{0,400}?-->|\bsystem\s*(?:note|override|message|notice)\b"
            r"|\b(?:this is )?an? (?:important|urgent) message (?:from|for)\b|\bmessage (?:to|for) (?:the )?(?:ai|assistant|agent|model)\b"
            r"|\b(?:to|for) (?:the|any|all) (?:ai|llm|assistant|agent)s? (?:reading|processing|that reads)\b",
            _F,
        ),
    ),
    (
        "trust",
        "asks to trust it over the user",
        re.compile(
            r"\btrust (?:this|these|the|its|results?|output|responses?)\b|\bover (?:anything|whatever|what) the user"
            r" (?:says|said|asks|wants)\b|\b(?:treat|regard|consider)\b[^.;\n]{0,40}\bas (?:instructions|orders|commands"
            r"|coming from the user|the user'?s? (?:request|instructions))\b|\bact on (?:any|all|the) (?:follow-up|next|further)"
            r" (?:steps|instructions|actions)\b|\bpre-?approved\b|\balready (?:approved|authori[sz]ed|consented)\b"
            r"|\b(?:keep|continue) asking\b|\bby default\b[^.;\n]{0,60}\b(?:confirm|purchase|buy|pay|approve)\b"
            r"|\bconfirm (?:the )?(?:purchase|payment|transfer|order) (?:immediately|automatically|right away)\b",
            _F,
        ),
    ),
    (
        "risky",
        "asks for a harmful action",
        re.compile(
            r"\b(?:delete|remove|wipe|erase|drop|destroy|transfer|wire|pay|approve|merge|grant|disable|turn off"
            r"|download|install|chmod|curl|wget|exec|eval|rm -rf|sudo|verify\s*=\s*false|add (?:a |an )?(?:fee|admin"
            r"|collaborator)|change the (?:recipient|payee|account|iban)|replace the (?:recipient|payee|account|address"
            r"|values?|results?))\b|lösch\w*|überweis\w*|supprim\w*|elimin\w*|borra\w*|cancell\w*|usuń|видал\w*"
            r"|удал\w*|переказ\w*|перевед\w*|删除|转账|削除|送金|삭제|송금",
            _F,
        ),
    ),
    (
        "secret_file",
        "names a file of secrets",
        re.compile(
            r"~/\.ssh|id_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|\bmcp\.json\b|/etc/(?:passwd|shadow)"
            r"|\.bash_history|\.zsh_history|\.git-credentials|\.npmrc\b|\.pypirc|\.netrc\b|\.kube/config"
            r"|\.docker/config\.json|\bwallet\.dat\b|\.gnupg|gh/hosts\.yml|\bprintenv\b|\bLogin Data\b|authorized_keys"
            r"|\.cursor/|claude_desktop_config",
            re.I,
        ),
    ),
]

NAMES = [name for name, _, _ in SIGNS]
DESCRIPTIONS = {name: description for name, description, _ in SIGNS}


def signs_of(sentence: str) -> frozenset[str]:
    """The signs a sentence carries."""
    return frozenset(name for name, _, pattern in SIGNS if pattern.search(sentence))


def excerpt_of(sentence: str, names: Iterable[str]) -> str:
    """The words that showed the first of `names` in the sentence."""
    for name, _, pattern in SIGNS:
        if name in names and (match := pattern.search(sentence)):
            return match.group(0)
    return sentence
